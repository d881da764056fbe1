"""The options of ``serve`` (and ``ls``) that say which models are served and how many stay loaded.

``--model`` pins one model; without it the library is served: the models folder (``--models-dir``,
else the one in Settings), the Hugging Face cache and the grafted copies. ``--alias`` gives a
pinned model more names (or, as ``NAME=MODEL``, lets a name or pattern pick a library model),
``--max-loaded`` caps how many models stay loaded (by default the memory estimates decide:
:data:`LOADED_SHARE` of RAM), ``--idle-unload`` unloads a model nobody used for that long, and
``--parallel`` is the sequences per model: on llama.cpp, that many requests decoded at once in one
context with continuous batching; by default as many as memory allows, at least 2 (MLX runs one
at a time; docs/server-api.md#several-clients).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from pathlib import Path

from app.engine.chat.memory import physical_memory_bytes
from app.engine.library.inventory import LibraryRoots
from app.engine.settings import SettingsStore, app_dirs, hf_hub_cache

LOADED_SHARE = 0.75
"""The share of RAM the loaded models' memory estimates may add up to (one model always loads)."""
DEFAULT_IDLE_UNLOAD = "10m"
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*$")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600}


def add_library_arguments(parser: argparse.ArgumentParser, backends: Sequence[str]) -> None:
    parser.add_argument(
        "--model",
        type=Path,
        help="serve only this model (a .gguf file or a model folder), loaded before the server "
        "listens; default: every model on disk, loaded on demand",
    )
    parser.add_argument(
        "--backend",
        choices=backends,
        default="auto",
        help="with --model: auto (llama.cpp for a .gguf, MLX for a folder), or force one",
    )
    parser.add_argument(
        "--models-dir",
        type=Path,
        metavar="DIR",
        help="the models folder to serve besides the Hugging Face cache (default: the one in "
        "Settings)",
    )
    parser.add_argument(
        "--alias",
        action="append",
        default=[],
        metavar="NAME[=MODEL]",
        help="with --model: another name the model answers to; without: NAME=MODEL lets NAME "
        "pick MODEL. NAME may be a pattern ('claude-*'); repeat for several",
    )
    parser.add_argument(
        "--max-loaded",
        type=_count,
        default=0,
        metavar="N",
        help="models kept loaded at once; the least recently used idle one is unloaded for a "
        f"new one (default 0: as many as fit {LOADED_SHARE * 100:.0f}%% of RAM by their memory "
        "estimates)",
    )
    parser.add_argument(
        "--idle-unload",
        type=duration_seconds,
        default=None,
        metavar="TIME",
        help=f"unload a model nobody used for TIME (90s, 10m, 1h; 0 = never; default "
        f"{DEFAULT_IDLE_UNLOAD}, never with --model)",
    )
    parser.add_argument(
        "--parallel",
        type=_positive,
        default=0,
        metavar="N",
        help="requests one llama.cpp model decodes at once: N sequences in one context with "
        "continuous batching, each drafting with its own MTP state (default: by memory, 2 to "
        "4); further requests wait in its queue. An MLX model runs one request at a time in "
        "its worker, the others wait in its queue",
    )


def idle_unload_seconds(args: argparse.Namespace) -> float:
    """``--idle-unload``, else 10 minutes for the library and never for a pinned model."""
    if args.idle_unload is not None:
        return args.idle_unload
    return 0.0 if args.model is not None else duration_seconds(DEFAULT_IDLE_UNLOAD)


def duration_seconds(text: str) -> float:
    """``90``, ``90s``, ``10m``, ``1h`` → seconds."""
    match = _DURATION.match(text)
    if match is None:
        raise argparse.ArgumentTypeError(
            f"{text[:40]!r} is not a time: write seconds (90 or 90s), minutes (10m) or hours (1h)"
        )
    return float(match.group(1)) * _UNIT_SECONDS[match.group(2)]


def memory_budget() -> int | None:
    """:data:`LOADED_SHARE` of this machine's RAM (None where it is unknown: no limit)."""
    ram = physical_memory_bytes()
    return int(ram * LOADED_SHARE) if ram else None


def model_folders(args: argparse.Namespace) -> LibraryRoots:
    models_dir = args.models_dir or SettingsStore().load().models_path()
    return LibraryRoots(Path(models_dir).expanduser(), hf_hub_cache(), app_dirs().grafted_models)


def _count(text: str) -> int:
    value = _integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a count: use 0 (no limit) or more")
    return value


def _positive(text: str) -> int:
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is invalid: use 1 or more")
    return value


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a whole number") from None
