"""``mtp-studio chat``: talk to a model with native MTP speculative decoding.

``--prompt TEXT`` answers one message (streamed to stdout, statistics on stderr, or one JSON
object with ``--json``); without it the command is an interactive chat that keeps the
conversation (``/reset`` forgets it, ``/exit`` or end of input quits, Ctrl-C stops the current
answer). With no ``--model`` it uses the bundled demo model. A model that drafts with a
separate drafter model (Gemma 4) finds it beside itself, in an ``MTP/`` folder or in the Hugging
Face cache, as the chat window does; ``--drafter FILE`` names one (refused in one line when it
does not fit the model).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

from app.commands.chat_remote import add_arguments as add_remote_arguments
from app.commands.chat_remote import run_remote
from app.commands.chat_session import converse
from app.engine.chat.context_choice import LoadPlan, plan_load
from app.engine.chat.discovery import default_model_roots, paired_drafter, paired_sidecar
from app.engine.chat.memory import physical_memory_bytes
from app.engine.chat.model_files import describe_model
from app.engine.errors import MtpStudioError, RuntimeBackendError
from app.engine.load_options import (
    DEFAULT_STATE_CACHE_MIB,
    FLASH_ATTENTION_MODES,
    KV_CACHE_TYPES,
    LoadOptions,
    load_options_problem,
)
from app.engine.runtime.backends.choice import BACKEND_CHOICES, LLAMA_CPP, MLX, choose_backend
from app.engine.runtime.bench.wide_model import widened_copy
from app.engine.runtime.chat_format.prompting import ChatMessage
from app.engine.runtime.core.backend import LoadSettings, ModelInfo
from app.engine.runtime.core.cpu_threads import choose_threads
from app.engine.runtime.core.demo_model import demo_model_path
from app.engine.runtime.core.request import (
    MAX_DRAFT_DEPTH,
    GenerationRequest,
    GenerationResult,
    check_mtp_depth,
)
from app.engine.runtime.core.stats import DecodeStats
from app.engine.runtime.process.client import GenerationStream, RuntimeClient
from app.engine.runtime.sampling.acceptance import AcceptMode
from app.engine.runtime.sampling.sampler import SamplerSettings
from app.engine.runtime.speculative.depth_policy import AUTO, AUTO_MAX_DEPTH, DEFAULT_MTP_DEPTH
from app.engine.settings import SettingsStore, hf_hub_cache
from app.engine.units import format_bytes

CLI_OPTION_NAMES = {
    "context_length": "--ctx",
    "kv_cache_type": "--kv-type",
    "flash_attention": "--flash-attn",
    "state_cache_mib": "--state-cache-mib",
    "threads": "--threads",
}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "chat",
        help="chat with a model (MTP speculative decoding)",
        description=(
            "Chat with a model using its MTP head for exact speculative decoding: a GGUF file on "
            "llama.cpp, or a Hugging Face / MLX folder on MLX with its MTP sidecar. Sampling "
            "order: temperature → top-k → top-p → min-p; --temp 0 is greedy."
        ),
    )
    add_model_arguments(parser)
    parser.add_argument(
        "--mtp-depth",
        type=depth_argument,
        default=DEFAULT_MTP_DEPTH,
        metavar="K|auto",
        help=(
            "tokens drafted per cycle by the MTP head; 0 = plain decoding; auto = chosen before "
            f"each cycle, 0 to {AUTO_MAX_DEPTH}, from the measured acceptance and cycle times "
            f"(default {DEFAULT_MTP_DEPTH})"
        ),
    )
    parser.add_argument(
        "--accept",
        choices=[mode.value for mode in AcceptMode],
        default=AcceptMode.LEVIATHAN_CHEN.value,
        help="lc = Leviathan–Chen acceptance (default), match = sample-and-compare",
    )
    parser.add_argument(
        "--stop-unsure-drafts",
        action="store_true",
        help="end a cycle's draft at a token the MTP head is unsure of, where the measured "
        "acceptance of such tokens and the draft's cost say it would not pay (exact)",
    )
    parser.add_argument("--temp", type=float, default=0.6, metavar="T", help="default 0.6")
    parser.add_argument("--top-p", type=float, default=0.95, metavar="P", help="default 0.95")
    parser.add_argument("--top-k", type=int, default=20, metavar="N", help="0 = off (default 20)")
    parser.add_argument("--min-p", type=float, default=0.0, metavar="P", help="0 = off (default)")
    parser.add_argument(
        "--seed",
        type=seed_argument,
        metavar="N",
        help="make sampling reproducible with seed N (0 to 2^63-1); -1 or none: a random seed",
    )
    parser.add_argument("--max-tokens", type=int, default=512, metavar="N")
    parser.add_argument("--system", metavar="TEXT", help="a system message to start with")
    parser.add_argument("--prompt", metavar="TEXT", help="answer this one message and exit")
    parser.add_argument(
        "--image",
        action="append",
        type=Path,
        metavar="FILE",
        help="a picture (PNG, JPEG, WebP) shown with the first message; repeat for several (the "
        "model needs a vision projector, see --mmproj)",
    )
    add_load_arguments(parser)
    parser.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object per answer (text, token ids, statistics)",
    )
    add_remote_arguments(parser)
    parser.set_defaults(func=run)


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """``--model``, ``--backend`` and ``--sidecar`` (shared with ``bench decode``)."""
    parser.add_argument(
        "--model",
        type=Path,
        help="a .gguf file or a Hugging Face / MLX model folder (default: the bundled demo)",
    )
    parser.add_argument(
        "--backend",
        choices=BACKEND_CHOICES,
        default="auto",
        help="auto (default): llama.cpp for a .gguf file, mlx for a model folder",
    )
    parser.add_argument(
        "--sidecar",
        type=Path,
        metavar="FILE",
        help=(
            "MTP sidecar (mtp.safetensors) for a model folder on MLX; default: the folder's own "
            "MTP tensors, else mtp.safetensors beside it, else a matching '<model>-mtp' sidecar "
            "repo in the Hugging Face cache or the models folder"
        ),
    )
    add_drafter_argument(parser)


def add_drafter_argument(parser: argparse.ArgumentParser) -> None:
    """``--drafter`` (shared with ``serve`` and ``bench decode``)."""
    parser.add_argument(
        "--drafter",
        type=Path,
        metavar="FILE",
        help=(
            "a separate drafter model to draft with (Gemma 4's assistant: a GGUF for a .gguf "
            "model, a folder for a model folder); default: the drafter beside the model, in an "
            "MTP/ folder there, or in the Hugging Face cache"
        ),
    )


def add_threads_argument(parser: argparse.ArgumentParser) -> None:
    """``--threads N``, its help naming this machine's default (shared with the benchmarks)."""
    default = choose_threads()
    parser.add_argument(
        "--threads",
        type=int,
        default=0,
        metavar="N",
        help=f"CPU threads for llama.cpp; 0 (default) = what llama.cpp's own tools use, here "
        f"{default.describe()}, or fewer for decoding steps where the model's step is timed "
        "faster on fewer when it loads (a small model, a busy machine)",
    )


def add_load_arguments(parser: argparse.ArgumentParser) -> None:
    """``--ctx``, ``--kv-type``, ``--flash-attn``, ``--state-cache-mib``, ``--mmproj`` and
    ``--threads`` (shared with ``serve``); the values are checked by :func:`load_plan`, so a bad
    one is one clear line."""
    parser.add_argument(
        "--ctx",
        type=int,
        default=0,
        metavar="N",
        help="context window in tokens; 0 (default) = the largest that fits this machine's "
        "memory (up to the model's trained context)",
    )
    parser.add_argument(
        "--kv-type",
        default="f16",
        metavar="TYPE",
        help=f"KV cache element type: {', '.join(KV_CACHE_TYPES)} (default f16; q8_0 about "
        "halves the cache, q4_0 about quarters it; quantised types need flash attention)",
    )
    parser.add_argument(
        "--flash-attn",
        default="auto",
        metavar="MODE",
        help=f"flash attention: {', '.join(FLASH_ATTENTION_MODES)} (default auto)",
    )
    parser.add_argument(
        "--state-cache-mib",
        type=int,
        default=DEFAULT_STATE_CACHE_MIB,
        metavar="MIB",
        help="memory for states kept between requests so a prompt that repeats an earlier "
        f"prefix prefills only the rest; 0 = keep none (default {DEFAULT_STATE_CACHE_MIB})",
    )
    parser.add_argument(
        "--mmproj",
        metavar="FILE|none",
        help="the vision projector to read images with (a GGUF model on llama.cpp); default: "
        "the mmproj-*.gguf beside the model, if any; none = text only",
    )
    add_threads_argument(parser)


def load_plan(
    args: argparse.Namespace,
    model: Path,
    *,
    max_draft_depth: int,
    error: type[MtpStudioError] = RuntimeBackendError,
) -> LoadPlan:
    """The load settings the arguments ask for, with the context chosen for this machine when
    ``--ctx`` is 0; a bad option raises ``error`` naming it and its valid values."""
    options = LoadOptions(
        context_length=args.ctx,
        kv_cache_type=args.kv_type,
        flash_attention=args.flash_attn,
        state_cache_mib=args.state_cache_mib,
        threads=args.threads,
    )
    problem = load_options_problem(options, CLI_OPTION_NAMES)
    if problem is not None:
        raise error(problem)
    plan = plan_load(
        describe_model(model),
        options,
        memory_bytes=physical_memory_bytes(),
        max_draft_depth=max_draft_depth,
    )
    if plan.kv_note is not None:
        raise error(f"--kv-type {args.kv_type} cannot be used: {plan.kv_note}; use --kv-type f16")
    settings = _with_projector(plan.settings, args.mmproj)
    settings = dataclasses.replace(settings, drafter=drafter_for(args, model))
    return dataclasses.replace(plan, settings=settings)


def _with_projector(settings: LoadSettings, mmproj: str | None) -> LoadSettings:
    """``--mmproj FILE`` names the projector, ``none`` turns images off; without it the
    runtime client looks beside the model."""
    if mmproj is None:
        return settings
    if mmproj.lower() == "none":
        return dataclasses.replace(settings, images=False)
    return dataclasses.replace(settings, projector=Path(mmproj))


def describe_images(info: ModelInfo) -> str:
    """``images: read with mmproj-….gguf`` (the vision tower inside a model folder on MLX) or
    the one line saying why the model reads none."""
    if info.projector is not None and info.projector.is_dir():
        return f"images: read with the vision tower in {info.projector.name} (mlx-vlm)"
    if info.projector is not None:
        return f"images: read with {info.projector.name}"
    return f"images: {info.images_unavailable_reason or 'not read by this model'}"


def drafter_for(args: argparse.Namespace, model: Path) -> Path | None:
    """``--drafter``, else the drafter the chat window pairs with ``model`` (None: none)."""
    named = getattr(args, "drafter", None)
    if named is not None:
        return Path(named).expanduser()
    return paired_drafter(Path(model), _model_roots())


def _model_roots() -> tuple[Path, ...]:
    return default_model_roots(SettingsStore().load().models_path(), hf_hub_cache())


def describe_load(plan: LoadPlan, info: ModelInfo) -> str:
    """``context 8192 tokens (the largest that fits this machine) · KV cache q8_0 · …``."""
    settings = plan.settings
    why = f" ({plan.choice.reason})" if plan.choice.reason else ""
    parts = [f"context {info.context_length} tokens{why}"]
    if info.sequences > 1:  # serve --parallel: that many requests at once, each its own window
        parts.append(f"{info.sequences} requests at once (continuous batching)")
    if info.backend == LLAMA_CPP:  # MLX keeps its own cache type and attention
        parts += [
            f"KV cache {settings.kv_cache_type}",
            f"flash attention {settings.flash_attention}",
        ]
    parts.append(f"kept states ≤ {settings.state_cache_mib} MiB")
    if plan.memory is not None:
        ram = physical_memory_bytes()
        of_ram = f" of {format_bytes(ram)} RAM" if ram else ""
        parts.append(f"memory ≈ {format_bytes(plan.memory.total_bytes)}{of_ram}")
    if info.cpu_variant is not None:  # a portable llama.cpp build: which code this CPU runs
        parts.append(f"llama.cpp CPU variant {info.cpu_variant}")
    return " · ".join(parts)


def stand_in(
    model: Path, args: argparse.Namespace, stack: ExitStack, progress: Callable[[str], None]
) -> Path:
    """``model``, or the benchmarks' stand-in for a larger one that ``--wide`` / ``--vocab`` ask
    for, written to a temporary folder that ``stack`` removes."""
    if args.wide == 1 and not args.vocab:
        return model
    wider = [f"every FFN widened {args.wide}×"] if args.wide != 1 else []
    wider += [f"the vocabulary padded to {args.vocab} tokens"] if args.vocab else []
    progress(f"writing the stand-in: {model.name} with {' and '.join(wider)}")
    folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="mtp-wide-")))
    return widened_copy(model, args.wide, folder, vocab=args.vocab)


def open_client(
    args: argparse.Namespace, settings: LoadSettings, model: Path | None = None
) -> RuntimeClient:
    """A client for ``model`` (default ``args.model``, else the demo) with the backend and
    sidecar the args ask for; without ``--sidecar`` a model folder gets the sidecar the chat
    window would pair."""
    model = model or (args.model if args.model is not None else demo_model_path())
    sidecar = args.sidecar
    if sidecar is None and choose_backend(args.backend, model).name == MLX:
        sidecar = paired_sidecar(Path(model), _model_roots())
    if settings.drafter is None:
        settings = dataclasses.replace(settings, drafter=drafter_for(args, Path(model)))
    return RuntimeClient(model, backend=args.backend, settings=settings, sidecar=sidecar)


def describe_backend(client: RuntimeClient) -> str:
    """``backend: llama.cpp — … · threads 2 (the 2 physical cores)``: the drafter and threads
    once the model is loaded; ``backend: mlx — a model folder runs on mlx-lm (mlx on CPU) ·
    sidecar: …``."""
    line = f"backend: {client.choice.name} — {client.choice.reason}"
    if client.sidecar is not None:
        line += f" · sidecar: {client.sidecar}"
    info = client.info
    if info is not None and info.drafter is not None:
        line += f" · drafter: {info.drafter}"
    if info is not None and info.threads is not None:
        line += f" · {info.threads.describe()}"
    return line


def describe_drafting(info: ModelInfo) -> str:
    """What drafts: ``drafter mtp-x.gguf (381 KB, 4 layers)`` or ``MTP head: 1 layer(s)``."""
    if info.drafter is not None:
        size = format_bytes(_size_on_disk(info.drafter))
        return f"drafter {info.drafter.name} ({size}, {info.mtp_layers} layers)"
    return f"MTP head: {info.mtp_layers} layer(s)"


def _size_on_disk(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(file.stat().st_size for file in path.glob("*.safetensors"))


MAX_SEED = 2**63 - 1
RANDOM_SEED = -1


def seed_argument(text: str) -> int | None:
    """A seed from 0 to 2^63-1, or None (a random seed) for -1, the usual "random" value."""
    try:
        seed = int(text)
    except ValueError:
        seed = None
    if seed == RANDOM_SEED:
        return None
    if seed is None or not 0 <= seed <= MAX_SEED:
        raise argparse.ArgumentTypeError(
            f"{text[:40]!r} is not a seed: use a whole number from 0 to {MAX_SEED}, or -1 for a "
            "random seed"
        )
    return seed


def depth_argument(text: str) -> int | str:
    """``auto`` or a whole number (its range is checked with the other settings)."""
    if text == AUTO:
        return AUTO
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a depth: use auto or 0 to {MAX_DRAFT_DEPTH}"
        ) from None


def _max_depth(args: argparse.Namespace) -> int:
    return AUTO_MAX_DEPTH if args.mtp_depth == AUTO else int(args.mtp_depth)


def run(args: argparse.Namespace) -> int:
    check_mtp_depth(_max_depth(args))
    sampler = SamplerSettings(
        temperature=args.temp,
        top_k=args.top_k,
        top_p=args.top_p,
        min_p=args.min_p,
        seed=args.seed,
    )
    if args.endpoint is not None:
        return run_remote(args, sampler)
    model = args.model if args.model is not None else demo_model_path()
    plan = load_plan(
        args, model, max_draft_depth=max(_max_depth(args), LoadSettings().max_draft_depth)
    )
    with open_client(args, plan.settings, model) as client:
        info = client.load()
        if not args.json:
            print(_describe(info, args), file=sys.stderr)
            print(describe_backend(client), file=sys.stderr)
            print(describe_load(plan, info), file=sys.stderr)
            print(describe_images(info), file=sys.stderr)
        return converse(args, lambda messages: _answer(client, args, sampler, messages).text)


def _answer(
    client: RuntimeClient,
    args: argparse.Namespace,
    sampler: SamplerSettings,
    messages: list[ChatMessage],
) -> GenerationResult:
    request = GenerationRequest(
        messages=tuple(messages),
        max_tokens=args.max_tokens,
        sampler=sampler,
        mtp_depth=_max_depth(args),
        accept=AcceptMode(args.accept),
        adaptive_depth=args.mtp_depth == AUTO,
        stop_unsure_drafts=args.stop_unsure_drafts,
    )
    stream = client.start(request)
    result = _stream_to_stdout(stream, echo=not args.json)
    if args.json:
        info = client.info
        print(json.dumps({"model": str(info.path) if info else None, **result.to_dict()}))
    else:
        print(file=sys.stdout, flush=True)
        if result.note:
            print(f"note: {result.note}", file=sys.stderr)
        print(format_stats(result.stats, result.finish_reason), file=sys.stderr)
    return result


def _stream_to_stdout(stream: GenerationStream, *, echo: bool) -> GenerationResult:
    """Print chunks as they come; Ctrl-C cancels the answer instead of quitting."""
    try:
        for chunk in stream:
            if echo:
                sys.stdout.write(chunk.text)
                sys.stdout.flush()
    except KeyboardInterrupt:
        stream.cancel()
    return stream.wait()


def _describe(info: ModelInfo, args: argparse.Namespace) -> str:
    depth = (
        f"depth auto (0–{AUTO_MAX_DEPTH})" if args.mtp_depth == AUTO else f"depth {args.mtp_depth}"
    )
    if _max_depth(args) == 0:
        head = "plain decoding"
    elif info.mtp_available:
        head = f"{describe_drafting(info)}, {depth}, {args.accept} acceptance"
    else:
        head = f"plain decoding ({info.mtp_unavailable_reason})"
    return f"{info.path.name} · {info.architecture} · {info.backend} · {head}"


def format_stats(stats: DecodeStats, finish_reason: str) -> str:
    """One line of the request's figures (shared with ``bench decode``'s wording)."""
    parts = [
        f"{stats.generated_tokens} tokens ({finish_reason})",
        f"{stats.decode_tokens_per_second:.1f} tok/s decode",
        f"TTFT {stats.ttft_seconds * 1000:.0f} ms",
        f"prompt {stats.prompt_tokens} tokens ({stats.prompt_reused_tokens} reused)",
        f"prefill {stats.prefill_tokens_per_second:.0f} tok/s",
    ]
    if stats.depth > 0:
        acceptance = " / ".join(
            f"{rate:.0%}" if drafted else "—"
            for rate, drafted in zip(stats.acceptance_by_depth, stats.drafted_by_depth, strict=True)
        )
        parts.append(
            f"acceptance by depth {acceptance}, {stats.tokens_per_cycle:.2f} tokens/cycle, "
            f"{stats.mean_draft_depth:.2f} drafts/cycle"
        )
    return " · ".join(parts)
