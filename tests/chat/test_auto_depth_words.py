"""What a reply's Details say about an adaptive ("auto") depth: why it drafted what it did, from
what it measured on this machine, instead of a row of 0 % acceptances that reads as broken."""

from __future__ import annotations

from dataclasses import replace

from app.engine.chat.figures import (
    auto_depth_line,
    compact_line,
    drafted_nothing,
    reply_figures,
    suggested_depth,
)
from app.engine.runtime.core.stats import DecodeStats
from app.engine.runtime.speculative.depth_policy import AdaptiveDepth

AUTO_REPLY = DecodeStats(
    mode="lc",
    depth=4,
    prompt_tokens=20,
    generated_tokens=60,
    cycles=40,
    drafted_by_depth=(30, 10, 0, 0),
    accepted_by_depth=(22, 6, 0, 0),
    prefill_seconds=0.01,
    ttft_seconds=0.02,
    elapsed_seconds=1.0,
    draft_seconds=0.1,
    draft_steps=40,
    verify_seconds=0.8,
    verify_calls=40,
    adaptive=True,
    auto_plain_rate=40.0,
    auto_depth_rates=(38.0, 52.5, 49.0, 0.0, 0.0),
    auto_kept_through=(0.76, 0.56, 0.36, 0.2),
)


def test_a_reply_that_drafted_says_it_was_the_fastest_here() -> None:
    assert auto_depth_line(AUTO_REPLY) == (
        "Auto drafted 1.00 tokens per cycle, the fastest here (depth 1 ran at 1.31× plain "
        "decoding's speed); depth 3 keeps 76 / 56 / 36 % of its drafts"
    )
    assert reply_figures(AUTO_REPLY, "stop").lines()[-1] == auto_depth_line(AUTO_REPLY)


def test_a_reply_that_drafted_nothing_says_why_and_shows_no_zero_row() -> None:
    plain = replace(
        AUTO_REPLY,
        drafted_by_depth=(0, 0, 0, 0),
        accepted_by_depth=(0, 0, 0, 0),
        auto_depth_rates=(37.0, 33.0, 30.5, 27.0, 0.0),
    )
    assert drafted_nothing(plain) and suggested_depth(plain) == 3
    figures = reply_figures(plain, "stop")
    assert figures.mtp is None  # no "acceptance by depth 0% / 0% / 0% / 0%"
    assert figures.auto == (
        "Auto drafted 0: on this machine a draft costs more than it saves (depth 1 ran at 0.82× "
        "plain decoding's speed); depth 3 keeps 76 / 56 / 36 % of its drafts"
    )
    assert compact_line(plain, "stop") == "60 tokens · 60.6 tok/s · MTP auto: no drafts"


def test_a_fixed_depth_says_nothing_of_auto() -> None:
    fixed = replace(AUTO_REPLY, adaptive=False, auto_depth_rates=(), auto_kept_through=())
    assert auto_depth_line(fixed) is None and not drafted_nothing(fixed)


def test_the_policy_estimates_what_it_measured() -> None:
    policy = AdaptiveDepth(4)
    for _ in range(30):  # depth 2 cycles, the first draft kept 3 times in 4
        policy.observe(2, 1, 0.010)
        policy.observe(2, 2, 0.010)
        policy.observe(2, 2, 0.010)
        policy.observe(2, 0, 0.010)
    estimate = policy.estimate()
    assert estimate.rates[2] > 0 and estimate.rates[1] == 0.0  # only depth 2 was timed
    assert 0.7 < estimate.kept_through[0] < 0.8
    assert list(estimate.kept_through) == sorted(estimate.kept_through, reverse=True)
