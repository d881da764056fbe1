"""The context a model gets when none is set: the largest that fits the machine's memory, with the
KV cache type and the kept-state budget counted; and the estimate those options change."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from app.engine.chat.context_choice import (
    FIT_SHARE,
    MIN_AUTO_CONTEXT,
    USUAL_MAX_CONTEXT,
    choose_context,
    load_settings_for,
    plan_load,
)
from app.engine.chat.memory import ModelShape, estimate_memory
from app.engine.chat.model_files import describe_model
from app.engine.load_options import LoadOptions
from app.engine.runtime.core.demo_model import demo_model_path
from app.engine.settings import Settings

GIB = 1 << 30
# About Qwen3-8B at Q4_K_M: 36 full-attention layers, 8 KV heads of 128, a 40,960-token context.
SHAPE = ModelShape(
    trained_context=40960,
    embedding_length=4096,
    vocab_size=151936,
    attention_layers=36,
    kv_heads=8,
    key_length=128,
    value_length=128,
)
WEIGHTS = 5 * GIB


def _context(memory_gib: float, kv: str = "f16", state_mib: int = 1024, shape=SHAPE) -> int:
    return choose_context(
        WEIGHTS,
        shape,
        with_mtp=False,
        kv_cache_type=kv,
        state_cache_mib=state_mib,
        memory_bytes=int(memory_gib * GIB),
    ).context


def _total(context: int, kv: str = "f16", state_mib: int = 1024) -> int:
    return estimate_memory(
        WEIGHTS,
        SHAPE,
        with_mtp=False,
        context=context,
        kv_cache_type=kv,
        state_cache_mib=state_mib,
    ).total_bytes


def test_the_context_shrinks_on_a_small_machine_and_grows_on_a_big_one() -> None:
    machines = (11.2, 12, 16, 32, 64, 256)
    contexts = [_context(gib) for gib in machines]
    assert contexts == sorted(contexts)
    assert contexts[0] < 4096 < contexts[2]  # a flat 4,096 would be wrong both ways
    assert contexts[3] == USUAL_MAX_CONTEXT
    assert contexts[-1] == SHAPE.trained_context  # plenty of memory: the whole trained context
    for gib, context in zip(machines[:3], contexts, strict=False):  # the largest that fits
        assert _total(context) <= FIT_SHARE * gib * GIB < _total(2 * context)


def test_beyond_32k_only_when_memory_is_plentiful() -> None:
    shape = replace(SHAPE, trained_context=131072)
    assert _context(48, shape=shape) == USUAL_MAX_CONTEXT
    assert _context(1024, shape=shape) == 131072


def test_a_machine_too_small_for_the_model_gets_the_smallest_context() -> None:
    choice = choose_context(
        WEIGHTS,
        SHAPE,
        with_mtp=False,
        kv_cache_type="f16",
        state_cache_mib=1024,
        memory_bytes=4 * GIB,
    )
    assert choice.context == MIN_AUTO_CONTEXT
    assert choice.reason == "the smallest; even it does not fit this machine"


def test_a_set_context_is_used_as_is_and_unknown_memory_gives_the_runtime_default() -> None:
    kwargs = {"with_mtp": False, "kv_cache_type": "f16", "state_cache_mib": 0}
    assert choose_context(WEIGHTS, SHAPE, memory_bytes=4 * GIB, requested=6000, **kwargs) == (
        choose_context(WEIGHTS, SHAPE, memory_bytes=None, requested=6000, **kwargs)
    )
    assert choose_context(WEIGHTS, SHAPE, memory_bytes=None, **kwargs).context == 4096
    short = replace(SHAPE, trained_context=1024)
    assert choose_context(WEIGHTS, short, memory_bytes=64 * GIB, **kwargs).context == 1024


def test_q8_0_about_halves_the_kv_cache_and_q4_0_about_quarters_it() -> None:
    def kv_bytes(kv: str) -> int:
        return estimate_memory(
            WEIGHTS, SHAPE, with_mtp=False, context=8192, kv_cache_type=kv
        ).kv_bytes

    f16 = kv_bytes("f16")
    assert f16 == 8192 * 36 * 8 * (128 + 128) * 2
    assert kv_bytes("q8_0") / f16 == pytest.approx(0.53, abs=0.01)
    assert kv_bytes("q4_0") / f16 == pytest.approx(0.28, abs=0.01)
    # …so on the same machine a quantised cache gets a longer context.
    assert _context(12, "f16") < _context(12, "q8_0") < _context(12, "q4_0")


def test_the_kept_state_budget_is_counted() -> None:
    estimate = estimate_memory(WEIGHTS, SHAPE, with_mtp=False, context=4096, state_cache_mib=512)
    without = estimate_memory(WEIGHTS, SHAPE, with_mtp=False, context=4096)
    assert estimate.total_bytes - without.total_bytes == 512 << 20
    assert _context(12, state_mib=4096) < _context(12, state_mib=0)


def test_the_chat_window_loads_with_the_saved_options_and_the_chosen_context() -> None:
    model = describe_model(demo_model_path())
    settings = Settings(kv_cache_type="q8_0", flash_attention="on", state_cache_mib=256)
    loaded = load_settings_for(model, settings, memory_bytes=64 * GIB)
    assert loaded.kv_cache_type == "q8_0" and loaded.flash_attention == "on"
    assert loaded.state_cache_mib == 256
    assert loaded.context_length == model.shape.trained_context  # a small model: it all fits
    fixed = load_settings_for(model, replace(settings, context_length=1536), memory_bytes=GIB)
    assert fixed.context_length == 1536


def test_the_estimate_follows_the_options() -> None:
    model = describe_model(demo_model_path())
    f16 = plan_load(model, LoadOptions(context_length=4096), memory_bytes=64 * GIB).memory
    q8 = plan_load(
        model, LoadOptions(context_length=4096, kv_cache_type="q8_0"), memory_bytes=64 * GIB
    ).memory
    assert f16 is not None and q8 is not None
    assert q8.kv_cache_type == "q8_0" and q8.kv_bytes < 0.6 * f16.kv_bytes
    assert q8.recurrent_bytes == f16.recurrent_bytes  # the recurrent states do not change


def test_heads_a_quantised_cache_cannot_split_keep_an_f16_cache_and_say_why(
    tiny_gguf: Path,
) -> None:
    """llama.cpp refuses q8_0/q4_0 for heads not a multiple of 32 wide (the tiny model: 16)."""
    model = describe_model(tiny_gguf)
    plan = plan_load(model, LoadOptions(kv_cache_type="q4_0"), memory_bytes=64 * GIB)
    assert plan.settings.kv_cache_type == "f16" and plan.memory.kv_cache_type == "f16"
    assert plan.kv_note == (
        "tiny-mtp.gguf's attention heads are 16 values wide, not a multiple of q4_0's "
        "32-value blocks"
    )
    loaded = load_settings_for(model, Settings(kv_cache_type="q4_0"), memory_bytes=64 * GIB)
    assert loaded.kv_cache_type == "f16"
