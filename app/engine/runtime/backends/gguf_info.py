"""Reads what the runtime must know about a GGUF file *before* llama.cpp touches it.

llama.cpp aborts the whole process on some inputs (e.g. an MTP context on a model loaded
without its MTP layers), and its own errors are log lines, not messages. So the file is checked
here first by reading its header (:mod:`app.engine.gguf_header`, milliseconds even with a large
vocabulary): it exists, it is a GGUF, which architecture it
has, and how many nextn (MTP) layers ``{arch}.nextn_predict_layers`` declares.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from app.engine.errors import RuntimeBackendError
from app.engine.gguf_header import read_gguf_header

MTP_ARCHITECTURES = frozenset(
    {
        "bailingmoe3",
        "cohere2moe",
        "deepseek2",
        "deepseek32",
        "deepseek4",
        "glm-dsa",
        "glm4moe",
        "glm5-next",
        "hy_v3",
        "mimo2",
        "nemotron_h_moe",
        "qwen35",
        "qwen35moe",
        "qwen3next",
        "step35",
    }
)
"""Architectures whose MTP draft graph exists in the pinned llama.cpp (src/models/*.cpp)."""

MULTI_BLOCK_MTP_ARCHITECTURES = frozenset({"glm5-next", "hy_v3", "mimo2", "step35"})
"""Of those, the ones whose graph accepts more than one nextn block; the others abort on it."""


@dataclass(frozen=True)
class GgufSummary:
    path: Path
    architecture: str
    nextn_layers: int
    block_count: int
    context_length: int
    chat_template: str | None

    @property
    def mtp_unavailable_reason(self) -> str | None:
        """Why this file cannot run MTP, or None when it can."""
        key = f"{self.architecture}.nextn_predict_layers"
        if self.nextn_layers <= 0:
            return (
                f"{self.path.name} has no MTP block ({key} is absent or 0), so decoding runs "
                "autoregressively; add the head from its MTP sidecar (mtp-studio graft, or the "
                'chat window\'s "Add the MTP head" button) or use a GGUF converted with its MTP '
                "layers to get speculative decoding"
            )
        if self.architecture not in MTP_ARCHITECTURES:
            return (
                f"{self.path.name} declares {self.nextn_layers} MTP layer(s) but the bundled "
                f"llama.cpp has no MTP graph for architecture '{self.architecture}', so decoding "
                "runs autoregressively"
            )
        if self.nextn_layers > 1 and self.architecture not in MULTI_BLOCK_MTP_ARCHITECTURES:
            return (
                f"{self.path.name} declares {self.nextn_layers} MTP blocks but the bundled "
                f"llama.cpp runs '{self.architecture}' MTP with exactly one, so decoding runs "
                "autoregressively"
            )
        return None


def read_gguf_summary(path: Path) -> GgufSummary:
    """Check ``path`` is a readable GGUF and read the runtime-relevant metadata."""
    path = Path(path)
    if not path.is_file():
        raise RuntimeBackendError(
            f"model file not found: {path} — check the path, or pass --model with a .gguf file"
        )
    metadata = read_gguf_header(path).metadata
    architecture = metadata.get("general.architecture")
    if not isinstance(architecture, str):
        raise RuntimeBackendError(
            f"{path} has no general.architecture key, so llama.cpp cannot load it; "
            "re-convert the model with llama.cpp's converter"
        )
    chat_template = metadata.get("tokenizer.chat_template")
    return GgufSummary(
        path=path,
        architecture=architecture,
        nextn_layers=int(metadata.get(f"{architecture}.nextn_predict_layers") or 0),
        block_count=int(metadata.get(f"{architecture}.block_count") or 0),
        context_length=int(metadata.get(f"{architecture}.context_length") or 0),
        chat_template=chat_template if isinstance(chat_template, str) else None,
    )
