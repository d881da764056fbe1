"""Client values quoted in errors and logs are short and single-line, and a seed of -1 means
"random" in ``chat`` as it does in ``serve`` (it used to be a traceback and a 500)."""

from __future__ import annotations

import json

import pytest

from app.cli import main
from app.engine.server.echo import ECHO_CHARACTERS, clean, echo


def test_echo_keeps_a_short_single_line_prefix() -> None:
    assert echo("robot") == '"robot"'
    assert echo(["a", 1]) == '["a", 1]'
    long = echo("x" * 10_000)
    assert long.endswith("…") and len(long) == ECHO_CHARACTERS + 1
    forged = clean("robot\r\nPOST /v1/forged 200\u2028\x1b[31m")
    assert forged == "robotPOST /v1/forged 200[31m"


def test_chat_seed_minus_one_is_random_and_other_negatives_are_refused(
    capsys: pytest.CaptureFixture,
) -> None:
    args = ["chat", "--prompt", "Hi", "--max-tokens", "2", "--threads", "1", "--ctx", "512"]
    seeds = set()
    for _ in range(2):
        assert main([*args, "--seed", "-1", "--json"]) == 0
        seeds.add(json.loads(capsys.readouterr().out)["seed"])
    assert len(seeds) == 2, "seed -1 reused one seed"
    with pytest.raises(SystemExit) as exited:
        main([*args, "--seed", "-5"])
    assert exited.value.code == 2
    assert "'-5' is not a seed: use -1 (random)" in capsys.readouterr().err
