"""How a local model is loaded, as the user chooses it: context, KV cache type, flash attention,
the memory kept for reusing earlier prompts and CPU threads — their valid values and one check.

The CLI (``chat``/``serve`` options) and the Settings dialog offer the same choices and must refuse
the same bad values with the same reason, so both check here. The module is light on purpose (no
numpy, no llama.cpp): :mod:`app.engine.settings` and the CLI's argument handling import it at
start-up. The llama.cpp backend maps the same names to its ggml constants
(``llama_cpp.model.KV_CACHE_TYPES``; a test keeps the two lists equal).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

KV_CACHE_TYPES = ("f16", "q8_0", "q4_0")
"""The attention KV cache's element type (llama.cpp ``--cache-type-k/v``)."""
KV_BYTES_PER_ELEMENT = {"f16": 2.0, "q8_0": 34 / 32, "q4_0": 18 / 32}
"""ggml's block sizes: q8_0 stores 32 values in 34 bytes, q4_0 in 18."""
FLASH_ATTENTION_MODES = ("auto", "on", "off")
DEFAULT_STATE_CACHE_MIB = 1024
"""The kept-state budget when none is chosen (``LoadSettings.state_cache_mib``)."""
MAX_THREADS = 512
"""ggml's ``GGML_MAX_N_THREADS``: llama.cpp refuses more threads."""

FIELD_NAMES = {
    "context_length": "context_length",
    "kv_cache_type": "kv_cache_type",
    "flash_attention": "flash_attention",
    "state_cache_mib": "state_cache_mib",
    "threads": "threads",
}
"""How a problem names each option by default (the settings file's keys)."""


@dataclass(frozen=True)
class LoadOptions:
    """``context_length`` 0: chosen from the model and the machine's memory
    (:func:`app.engine.chat.context_choice.choose_context`); ``threads`` 0: what llama.cpp's own
    tools use (:func:`app.engine.runtime.core.cpu_threads.choose_threads`)."""

    context_length: int = 0
    kv_cache_type: str = "f16"
    flash_attention: str = "auto"
    state_cache_mib: int = DEFAULT_STATE_CACHE_MIB
    threads: int = 0


def load_options_problem(
    options: LoadOptions, names: Mapping[str, str] = FIELD_NAMES
) -> str | None:
    """Why ``options`` cannot be used (naming each option as ``names`` says), or None."""
    if options.context_length < 0:
        return (
            f"{names['context_length']} {options.context_length} is invalid: use 0 (chosen from "
            "the model and the machine's memory) or a number of tokens"
        )
    if options.kv_cache_type not in KV_CACHE_TYPES:
        return (
            f"{names['kv_cache_type']} {options.kv_cache_type!r} is unknown: use one of "
            f"{', '.join(KV_CACHE_TYPES)}"
        )
    if options.flash_attention not in FLASH_ATTENTION_MODES:
        return (
            f"{names['flash_attention']} {options.flash_attention!r} is unknown: use one of "
            f"{', '.join(FLASH_ATTENTION_MODES)}"
        )
    if options.kv_cache_type != "f16" and options.flash_attention == "off":
        return (
            f"{names['kv_cache_type']} {options.kv_cache_type} needs flash attention (llama.cpp "
            f"cannot quantise the V cache without it): set {names['flash_attention']} to auto or "
            "on, or use f16"
        )
    if options.state_cache_mib < 0:
        return (
            f"{names['state_cache_mib']} {options.state_cache_mib} is invalid: use 0 (keep no "
            "states between requests) or a size in MiB"
        )
    if not 0 <= options.threads <= MAX_THREADS:
        return (
            f"{names['threads']} {options.threads} is invalid: use 0 (llama.cpp's default, the "
            f"physical performance cores) or a count from 1 to {MAX_THREADS}"
        )
    return None
