"""The measured plain speed behind the "MTP ×N faster" badge, and how the figures word it."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest

from app.engine.chat.figures import (
    NOT_MEASURED_TEXT,
    TOO_SHORT_TEXT,
    badge_text,
    compact_line,
    speedup_line,
)
from app.engine.chat.plain_speed import (
    KEPT_MEASUREMENTS,
    MIN_MEASURED_TOKENS,
    PlainSpeed,
    PlainSpeedStore,
    speed_key,
    speedup,
)
from app.engine.runtime.core.stats import DecodeStats


def _stats(tokens: int, decode_seconds: float, depth: int = 0) -> DecodeStats:
    """A request's figures: ``tokens`` decoded in ``decode_seconds`` after 0.5 s of prefill."""
    cycles = tokens // 2 if depth else tokens
    return DecodeStats(
        mode="lc",
        depth=depth,
        prompt_tokens=20,
        generated_tokens=tokens,
        cycles=cycles,
        drafted_by_depth=(cycles,) * depth,
        accepted_by_depth=(cycles,) * depth,
        prefill_seconds=0.5,
        ttft_seconds=0.6,
        elapsed_seconds=0.5 + decode_seconds,
        draft_seconds=0.0,
        draft_steps=0,
        verify_seconds=0.0,
        verify_calls=0,
    )


def test_plain_replies_are_kept_and_read_back_as_their_median(tmp_path: Path) -> None:
    store = PlainSpeedStore(tmp_path / "data" / "plain-speed.json")
    assert store.plain_speed("model|machine|llama.cpp") is None
    for seconds in (1.0, 4.0, 2.0):  # 100, 25 and 50 tok/s
        assert store.record("model|machine|llama.cpp", _stats(100, seconds))
    assert store.plain_speed("model|machine|llama.cpp") == PlainSpeed(50.0, 3)
    reopened = PlainSpeedStore(store.path)
    assert reopened.plain_speed("model|machine|llama.cpp") == PlainSpeed(50.0, 3)
    assert reopened.plain_speed("other|machine|llama.cpp") is None
    assert [path.name for path in store.path.parent.iterdir()] == ["plain-speed.json"]


def test_only_the_last_plain_replies_count(tmp_path: Path) -> None:
    store = PlainSpeedStore(tmp_path / "plain-speed.json")
    for seconds in (10.0, 10.0, 10.0, 1.0, 1.0, 1.0, 1.0, 1.0):
        store.record("key", _stats(100, seconds))
    assert store.plain_speed("key") == PlainSpeed(100.0, KEPT_MEASUREMENTS)


def test_mtp_replies_and_short_replies_do_not_measure_the_plain_speed(tmp_path: Path) -> None:
    store = PlainSpeedStore(tmp_path / "plain-speed.json")
    assert not store.record("key", _stats(100, 1.0, depth=2))
    assert not store.record("key", _stats(MIN_MEASURED_TOKENS - 1, 0.1))
    assert not store.path.exists() and store.plain_speed("key") is None
    assert store.record("key", _stats(MIN_MEASURED_TOKENS, 0.1))


@pytest.mark.parametrize(
    "content",
    [
        "{not json",
        "[1, 2]",
        json.dumps({"version": 99, "plain_tokens_per_second": {"key": [10.0]}}),
        json.dumps({"version": 1, "plain_tokens_per_second": "fast"}),
    ],
)
def test_an_unusable_file_is_ignored_and_replaced(
    tmp_path: Path, content: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "plain-speed.json"
    path.write_text(content, encoding="utf-8")
    store = PlainSpeedStore(path)
    with caplog.at_level(logging.WARNING):
        assert store.plain_speed("key") is None
    assert f"ignoring {path}" in caplog.text
    assert store.record("key", _stats(100, 2.0))
    assert store.plain_speed("key") == PlainSpeed(50.0, 1)


def test_nonsense_values_in_the_file_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "plain-speed.json"
    values = [40.0, -3, 0, "fast", True, None, 60]
    path.write_text(
        json.dumps({"version": 1, "plain_tokens_per_second": {"key": values, "bad": "x"}}),
        encoding="utf-8",
    )
    assert PlainSpeedStore(path).plain_speed("key") == PlainSpeed(50.0, 2)
    assert PlainSpeedStore(path).plain_speed("bad") is None


def test_the_key_follows_the_model_file_not_its_name(tmp_path: Path, tiny_gguf: Path) -> None:
    copy = shutil.copy(tiny_gguf, tmp_path / "renamed.gguf")
    assert speed_key(Path(copy), "llama.cpp") == speed_key(tiny_gguf, "llama.cpp")
    assert speed_key(tiny_gguf, "mlx") != speed_key(tiny_gguf, "llama.cpp")
    other = tmp_path / "other.gguf"
    other.write_bytes(tiny_gguf.read_bytes()[:-1])
    assert speed_key(other, "llama.cpp") != speed_key(tiny_gguf, "llama.cpp")


def test_the_speedup_and_its_words() -> None:
    plain = PlainSpeed(100.0, 2)
    fast = _stats(180, 1.0, depth=2)  # 180 tok/s
    measured = speedup(fast, plain)
    assert measured is not None and measured.ratio == pytest.approx(1.8)
    assert measured.earns_badge and badge_text(measured) == "MTP ×1.8 faster"
    assert speedup_line(fast, measured) == (
        "MTP ×1.80 against this model's plain speed, 100.0 tok/s (median of 2 plain replies "
        "on this machine)"
    )
    barely = speedup(_stats(105, 1.0, depth=2), plain)
    assert barely is not None and not barely.earns_badge
    assert speedup_line(_stats(105, 1.0, depth=2), barely).endswith("below ×1.1, so no badge")
    assert speedup(fast, None) is None and speedup_line(fast, None) == NOT_MEASURED_TEXT
    short = _stats(MIN_MEASURED_TOKENS - 1, 0.01, depth=2)
    assert speedup(short, plain) is None and speedup_line(short, None) == TOO_SHORT_TEXT
    plain_reply = _stats(100, 1.0)
    assert speedup(plain_reply, plain) is None and speedup_line(plain_reply, None) is None


def test_the_compact_line() -> None:
    mtp = _stats(300, 2.0, depth=2)  # 150 tok/s, every draft accepted: 3 tokens per cycle
    assert compact_line(mtp, "stop") == "300 tokens · 150.0 tok/s · MTP 3.00 tokens/cycle"
    assert compact_line(mtp, "length").endswith(" · max tokens")
    assert compact_line(mtp, None).endswith(" · generating…")
    assert compact_line(_stats(40, 0.5), "cancelled") == "40 tokens · 80.0 tok/s · stopped"
