"""Client values quoted in errors and logs are short and single-line (``chat --seed -1`` is tested
in tests/runtime/test_cli_seed.py)."""

from __future__ import annotations

from app.engine.server.core.echo import ECHO_CHARACTERS, clean, echo


def test_echo_keeps_a_short_single_line_prefix() -> None:
    assert echo("robot") == '"robot"'
    assert echo(["a", 1]) == '["a", 1]'
    long = echo("x" * 10_000)
    assert long.endswith("…") and len(long) == ECHO_CHARACTERS + 1
    forged = clean("robot\r\nPOST /v1/forged 200\u2028\x1b[31m")
    assert forged == "robotPOST /v1/forged 200[31m"
