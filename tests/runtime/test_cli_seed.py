"""Issue 23: ``chat --seed -1`` means a random seed (it was a traceback); a bad seed is one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main


def _chat(model: Path, *extra: str) -> list[str]:
    common = ["--threads", "1", "--ctx", "1024", "--prompt", "Hi", "--max-tokens", "3", "--json"]
    return ["chat", "--model", str(model), *common, *extra]


@pytest.mark.slow
def test_seed_minus_one_samples_with_a_random_seed(
    tiny_models: dict[str, Path], capsys: pytest.CaptureFixture
) -> None:
    seeds = []
    for _ in range(2):
        assert main(_chat(tiny_models["mtp"], "--seed", "-1")) == 0
        seeds.append(json.loads(capsys.readouterr().out)["seed"])
    assert all(0 <= seed < 2**63 for seed in seeds) and seeds[0] != seeds[1]


def test_a_given_seed_is_used(tiny_models: dict[str, Path], capsys: pytest.CaptureFixture) -> None:
    assert main(_chat(tiny_models["mtp"], "--seed", "1234")) == 0
    assert json.loads(capsys.readouterr().out)["seed"] == 1234


@pytest.mark.parametrize("seed", ["-2", str(2**63), "abc"])
def test_a_seed_out_of_range_is_one_line_and_exit_2(
    tiny_models: dict[str, Path], capsys: pytest.CaptureFixture, seed: str
) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(_chat(tiny_models["mtp"], "--seed", seed))
    assert stopped.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"argument --seed: {seed!r} is not a seed" in error and "-1 for a random seed" in error
