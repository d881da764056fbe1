"""``bench chat`` on the bundled demo model through the real worker (and real llama-server).

What a user reads off the table: from turn 2 on, the conversation so far is reused and only the
new tokens are computed; the cold column computes the same prompts from scratch; llama-server's
column shows its prompt cache at work. Times are printed, never asserted (bench, not tests).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
from pathlib import Path

import pytest

from app.cli import main
from app.commands.bench_chat import render
from app.engine.runtime.bench.chat_bench import ChatBenchSettings, run_chat_benchmark
from app.engine.runtime.core.backend import LoadSettings
from app.engine.runtime.core.demo_model import demo_model_path
from app.engine.runtime.process.client import RuntimeClient

SETTINGS = LoadSettings(threads=1, context_length=2048)
COLD_SETTINGS = dataclasses.replace(SETTINGS, state_cache_mib=0)
FEW = 4  # template tokens around a message that may tokenise differently once it is history
ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+[\d.]+\b")


@pytest.mark.slow
def test_each_turn_reuses_the_conversation_so_far_and_the_cold_column_does_not() -> None:
    settings = ChatBenchSettings(turns=3, history_tokens=400, max_tokens=12, mtp_depth=2)
    with (
        RuntimeClient(demo_model_path(), settings=SETTINGS) as client,
        RuntimeClient(demo_model_path(), settings=COLD_SETTINGS) as cold,
    ):
        benchmark = run_chat_benchmark(client, settings, cold_client=cold, threads=1)

    turns = benchmark.turns
    assert [turn.turn for turn in turns] == [1, 2, 3]
    assert 200 < turns[-1].ours.prompt_tokens < 600  # about the asked history
    for previous, turn in itertools.pairwise(turns):
        ours = turn.ours
        assert ours.prompt_tokens > previous.ours.prompt_tokens
        assert ours.reused_tokens >= previous.ours.prompt_tokens - FEW, turn.turn
        assert ours.computed_tokens == ours.prompt_tokens - ours.reused_tokens
        assert ours.computed_tokens < ours.prompt_tokens / 4, turn.turn
    for turn in turns:  # the caller's wait contains the worker's
        assert turn.ours.client_ttft_seconds >= turn.ours.ttft_seconds > 0
    for turn in turns:
        assert turn.cold is not None
        # The same conversation with a short marker in front, computed from scratch.
        assert 0 < turn.cold.prompt_tokens - turn.ours.prompt_tokens <= FEW
        assert turn.cold.computed_tokens >= turn.cold.prompt_tokens - FEW, turn.turn
    assert benchmark.kept_state_bytes > 0

    table = render(benchmark)
    rows = [ROW.match(line) for line in table.splitlines()]
    rows = [row for row in rows if row]
    assert [int(row[1]) for row in rows] == [1, 2, 3]
    assert [int(row[3]) for row in rows] == [turn.ours.reused_tokens for turn in turns]
    assert "cold TTFT ms" in table and "kept states after the last turn: " in table
    assert "median of turns 2–3, TTFT in the worker: ours " in table and "cold / ours" in table
    assert "median of turns 2–3, first token as the caller sees it: ours " in table


@pytest.mark.slow
def test_bench_chat_json_has_a_turn_per_turn_with_its_cold_replay(
    capsys: pytest.CaptureFixture,
) -> None:
    command = ["bench", "chat", "--turns", "2", "--history-tokens", "200", "--max-tokens", "4"]
    assert main([*command, "--threads", "1", "--mtp-depth", "0", "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["depth"] == "plain decoding"
    assert [turn["turn"] for turn in figures["turns"]] == [1, 2]
    second = figures["turns"][1]
    assert second["ours"]["reused_tokens"] >= figures["turns"][0]["ours"]["prompt_tokens"] - FEW
    assert second["cold"]["computed_tokens"] >= second["cold"]["prompt_tokens"] - FEW
    assert second["llama_server"] is None
    assert figures["median_ttft_turns_2_on"]["ours"] > 0


def test_a_history_longer_than_the_context_is_refused_before_the_first_turn(
    capsys: pytest.CaptureFixture,
) -> None:
    command = ["bench", "chat", "--history-tokens", "5000", "--ctx", "1024", "--threads", "1"]
    assert main([*command, "--no-cold"]) == 2
    error = capsys.readouterr().err
    assert "5032 tokens but the context holds 1024" in error and "--history-tokens" in error


@pytest.mark.slow
def test_llama_server_gets_the_same_turns_and_its_prompt_cache_serves_turn_two(
    llama_server_binary: Path, capsys: pytest.CaptureFixture
) -> None:
    command = ["bench", "chat", "--turns", "2", "--history-tokens", "300", "--max-tokens", "8"]
    command += ["--threads", "1", "--no-cold", "--vs-llama-server", str(llama_server_binary)]
    assert main(command) == 0
    table = capsys.readouterr().out
    assert "server cached" in table and "llama-server" in table
    rows = [line for line in table.splitlines() if ROW.match(line)]
    assert len(rows) == 2
    server_columns = [row.split("│")[1].split() for row in rows]
    assert all(len(columns) == 4 for columns in server_columns)  # cached, computed, 2 times
    cached, computed = (int(server_columns[1][0]), int(server_columns[1][1]))
    ours_prompt = int(ROW.match(rows[1])[2])
    assert cached > 0
    # Both saw the same conversation: llama-server's prompt is ours, token for token in count.
    assert abs(cached + computed - ours_prompt) <= FEW
    assert "ours / llama-server" in table
