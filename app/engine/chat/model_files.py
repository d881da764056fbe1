"""What the model picker says about one model: size, architecture, MTP heads, memory, runnability.

Two kinds of model can be picked: a GGUF file (llama.cpp) and a Hugging Face-format folder
(config.json + safetensors, for the MLX backend). Both are described from their headers only —
never by loading them — so the picker can list many models quickly and a broken file shows up
as a readable problem on its row instead of a crash when it is chosen.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from app.engine.bounded_json import parse_bounded_json
from app.engine.chat.memory import MemoryEstimate, ModelShape, estimate_memory
from app.engine.drafter.facts import DRAFTER_REASON, is_drafter_architecture, is_drafter_config
from app.engine.errors import MtpStudioError
from app.engine.gguf_header import GgufHeader, LongArray, read_gguf_header
from app.engine.mtp.detect import detect_mtp
from app.engine.mtp.source import LocalFolderSource
from app.engine.runtime.backends.choice import GGUF_REASON, LLAMA_CPP, BackendChoice, choose_backend
from app.engine.runtime.backends.gguf_info import GgufSummary
from app.engine.units import format_names

GGUF = "gguf"
HF_FOLDER = "hf-folder"
DEMO = "demo"
DOWNLOADED = "downloaded"
OPENED = "opened"

MAX_COUNT = 2**40
"""The largest count a config.json may give (layers, width, context…) before it counts as none."""
_SPLIT_PART = re.compile(r"^(?P<stem>.+)-(?P<index>\d{5})-of-(?P<count>\d{5})\.gguf$")


@dataclass(frozen=True)
class ModelDescription:
    """One pickable model. ``problem`` set: the model cannot be read (the other fields are
    mostly empty); ``runnable_reason`` set: it can be read but not run here, and why."""

    path: Path
    kind: str
    origin: str
    name: str
    size_bytes: int = 0
    architecture: str = ""
    mtp_blocks: int = 0
    mtp_note: str | None = None
    """Why MTP will not run for this model (None: it will)."""
    memory: MemoryEstimate | None = None
    """At the runtime's default context; :mod:`context_choice` re-estimates for load options."""
    shape: ModelShape | None = None
    """What the memory estimate is computed from (None when the model cannot be read)."""
    chat_template: str | None = None
    repo_id: str | None = None
    sidecar: Path | None = None
    drafter: Path | None = None
    """The separate drafter model paired with it (Gemma 4's assistant), None when none fits."""
    drafter_bytes: int = 0
    """The paired drafter's size on disk (its GGUF, or its folder's safetensors)."""
    drafter_note: str | None = None
    """Why drafters found for it were passed over (None when one fits or none was found)."""
    is_drafter: bool = False
    """It is itself a drafter (by architecture): never listed as a model of its own."""
    runnable_reason: str | None = None
    problem: str | None = None
    backend: BackendChoice | None = None
    """The backend ``auto`` runs it on, and why (None when it cannot run here)."""

    @property
    def runnable(self) -> bool:
        return self.problem is None and self.runnable_reason is None

    def with_origin(self, origin: str, repo_id: str | None = None) -> ModelDescription:
        return replace(self, origin=origin, repo_id=repo_id or self.repo_id)


def describe_model(path: Path, origin: str = OPENED) -> ModelDescription:
    """Describe the GGUF file or model folder at ``path`` (problems are reported, not raised)."""
    path = Path(path).expanduser()
    kind = HF_FOLDER if path.is_dir() else GGUF
    try:
        return _describe_folder(path, origin) if kind == HF_FOLDER else _describe_gguf(path, origin)
    except MtpStudioError as exc:
        return ModelDescription(path, kind, origin, path.name, problem=str(exc))


# -- GGUF ---------------------------------------------------------------------------------------


def split_parts(path: Path) -> list[Path]:
    """All files of a split GGUF (``name-00001-of-00003.gguf``), or just ``path``."""
    match = _SPLIT_PART.match(path.name)
    if match is None:
        return [path]
    count = int(match["count"])
    return [
        path.with_name(f"{match['stem']}-{i:05d}-of-{count:05d}.gguf") for i in range(1, count + 1)
    ]


def _describe_gguf(path: Path, origin: str) -> ModelDescription:
    header = read_gguf_header(path)
    metadata = header.metadata
    architecture = metadata.get("general.architecture")
    if not isinstance(architecture, str):
        raise MtpStudioError(
            f"{path} has no general.architecture key, so llama.cpp cannot load it; re-convert "
            "the model with llama.cpp's converter"
        )
    parts = split_parts(path)
    missing = [part.name for part in parts if not part.is_file()]
    if missing:
        which = (
            f"{missing[0]} is missing"
            if len(missing) == 1
            else f"{len(missing):,} of them ({format_names(missing)}) are missing"
        )
        raise MtpStudioError(
            f"{path.name} is split into {len(parts):,} files but {which}; download every part "
            "into the same folder"
        )
    for part in parts:
        _check_complete(part, header if part == path else read_gguf_header(part))

    def number(key: str, default: int = 0) -> int:
        value = metadata.get(f"{architecture}.{key}")
        if isinstance(value, list):
            value = max(value, default=default)
        return int(value) if isinstance(value, int | float) else default

    template = metadata.get("tokenizer.chat_template")
    template = template if isinstance(template, str) else None
    summary = GgufSummary(
        path=path,
        architecture=architecture,
        nextn_layers=number("nextn_predict_layers"),
        block_count=number("block_count"),
        context_length=number("context_length"),
        chat_template=template,
    )
    size = sum(part.stat().st_size for part in parts)
    mtp_note = summary.mtp_unavailable_reason
    shape = _gguf_shape(metadata, number)
    drafter = is_drafter_architecture(architecture)
    return ModelDescription(
        path=path,
        kind=GGUF,
        origin=origin,
        name=path.name,
        size_bytes=size,
        architecture=architecture,
        mtp_blocks=summary.nextn_layers,
        mtp_note=mtp_note,
        memory=estimate_memory(size, shape, with_mtp=mtp_note is None),
        shape=shape,
        chat_template=template,
        backend=BackendChoice(LLAMA_CPP, GGUF_REASON),
        is_drafter=drafter,
        runnable_reason=DRAFTER_REASON.format(name=path.name, architecture=architecture)
        if drafter
        else None,
    )


def _check_complete(path: Path, header: GgufHeader) -> None:
    """A truncated download keeps its header: compare the size its tensors need with the file."""
    size = path.stat().st_size
    if header.required_bytes is not None and size < header.required_bytes:
        raise MtpStudioError(
            f"{path.name} is incomplete: its tensors need {header.required_bytes:,} bytes but the "
            f"file has {size:,} (an interrupted download or copy); download it again"
        )


def _gguf_shape(metadata: dict[str, Any], number: Any) -> ModelShape:
    blocks = number("block_count")
    mtp_layers = number("nextn_predict_layers")
    trunk = max(blocks - mtp_layers, 0)
    width = number("embedding_length")
    heads = max(number("attention.head_count", 1), 1)
    key_length = number("attention.key_length", width // heads)
    value_length = number("attention.value_length", key_length)
    interval = number("full_attention_interval")
    inner = number("ssm.inner_size")
    if inner and interval:
        attention_layers = trunk // interval
    elif inner:
        attention_layers = 0
    else:
        attention_layers = trunk
    state = number("ssm.state_size")
    conv_channels = inner + 2 * number("ssm.group_count") * state
    recurrent_state = (inner * state + max(number("ssm.conv_kernel") - 1, 0) * conv_channels) * 4
    tokens = metadata.get("tokenizer.ggml.tokens")
    vocab = number("vocab_size") or (tokens.count if isinstance(tokens, LongArray) else 0)
    return ModelShape(
        trained_context=number("context_length"),
        embedding_length=width,
        vocab_size=vocab,
        attention_layers=attention_layers,
        kv_heads=number("attention.head_count_kv", heads),
        key_length=key_length,
        value_length=value_length,
        recurrent_layers=trunk - attention_layers if inner else 0,
        recurrent_state_bytes=recurrent_state if inner else 0,
        mtp_layers=mtp_layers,
    )


# -- Hugging Face folder -----------------------------------------------------------------------


def _describe_folder(path: Path, origin: str) -> ModelDescription:
    config_path = path / "config.json"
    if not config_path.is_file():
        raise MtpStudioError(
            f"{path} has no config.json, so it is not a Hugging Face model folder; open the "
            "folder that holds config.json and the *.safetensors files, or a .gguf file"
        )
    try:
        config = parse_bounded_json(config_path.read_bytes())
    except (OSError, ValueError) as exc:
        raise MtpStudioError(f"{config_path} cannot be read ({exc}); re-download it") from None
    if not isinstance(config, dict):
        raise MtpStudioError(f"{config_path} is not a JSON object; re-download it")
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else {}
    merged = {**config, **text}
    architectures = config.get("architectures") or []
    architecture = str(architectures[0] if architectures else merged.get("model_type", "unknown"))
    size = sum(file.stat().st_size for file in path.glob("*.safetensors"))
    mtp_blocks, mtp_note = _folder_mtp(path)
    shape = config_shape(merged)
    backend = None
    try:
        backend = choose_backend("auto", path)
        runnable_reason = None
    except MtpStudioError as exc:
        runnable_reason = str(exc)
    drafter = is_drafter_config(config)
    if drafter:
        runnable_reason = DRAFTER_REASON.format(name=path.name, architecture=architecture)
    return ModelDescription(
        path=path,
        kind=HF_FOLDER,
        origin=origin,
        name=path.name,
        size_bytes=size,
        architecture=architecture,
        mtp_blocks=mtp_blocks,
        mtp_note=mtp_note,
        memory=estimate_memory(size, shape, with_mtp=mtp_blocks > 0),
        shape=shape,
        chat_template=_folder_template(path),
        runnable_reason=runnable_reason,
        backend=backend,
        is_drafter=drafter,
    )


def _folder_mtp(path: Path) -> tuple[int, str | None]:
    try:
        detection = detect_mtp(LocalFolderSource(path))
    except MtpStudioError as exc:
        return 0, str(exc)
    return len(detection.layer_indices), None


def _folder_template(path: Path) -> str | None:
    for name, key in (("chat_template.jinja", None), ("tokenizer_config.json", "chat_template")):
        file = path / name
        if not file.is_file():
            continue
        try:
            text = file.read_text(encoding="utf-8")
            value = text if key is None else json.loads(text).get(key)
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            continue
        if isinstance(value, str):
            return value
    return None


def config_shape(config: dict[str, Any]) -> ModelShape:
    """A model's shape from its config.json (the text config merged in for multimodal ones)."""

    def number(key: str, default: int = 0) -> int:
        """A count from the config; anything but a whole number from 0 to 2^40 (a string,
        ``NaN``, ``Infinity``, 10^300) counts as not given."""
        value = config.get(key)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT:
            return value
        return default

    layers = number("num_hidden_layers")
    width = number("hidden_size")
    heads = max(number("num_attention_heads", 1), 1)
    layer_types = config.get("layer_types")
    if isinstance(layer_types, list) and layer_types:
        attention_layers = sum(1 for kind in layer_types if kind == "full_attention")
    elif number("full_attention_interval"):
        attention_layers = layers // number("full_attention_interval")
    else:
        attention_layers = layers
    recurrent = layers - attention_layers
    value_heads = number("linear_num_value_heads")
    key_dim = number("linear_key_head_dim")
    value_dim = number("linear_value_head_dim")
    conv_channels = number("linear_num_key_heads") * key_dim * 2 + value_heads * value_dim
    recurrent_state = (
        value_heads * key_dim * value_dim
        + max(number("linear_conv_kernel_dim") - 1, 0) * conv_channels
    ) * 4
    head_dim = number("head_dim", width // heads)
    return ModelShape(
        trained_context=number("max_position_embeddings"),
        embedding_length=width,
        vocab_size=number("vocab_size"),
        attention_layers=attention_layers,
        kv_heads=number("num_key_value_heads", heads),
        key_length=head_dim,
        value_length=head_dim,
        recurrent_layers=recurrent,
        recurrent_state_bytes=recurrent_state if recurrent else 0,
        mtp_layers=number("mtp_num_hidden_layers") or number("num_nextn_predict_layers"),
    )
