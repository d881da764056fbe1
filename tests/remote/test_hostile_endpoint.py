"""Issue 34: ``chat --endpoint`` against a server that lies ends in one clear line, never a
traceback or a MemoryError; statistics that are not counts are simply not reported.

Each case of :mod:`tests.remote.hostile_endpoint` is served over real HTTP and the real CLI is run
against it, as a user would.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.commands.chat_remote import NO_ACCEPTANCE
from tests.remote.hostile_endpoint import hostile_endpoint

ROOT = Path(__file__).resolve().parents[2]

REFUSED = {
    "choices is 5": "sent 'choices' 5, not a list of choices",
    "nested data: line": "sent JSON nested too deeply to read",
    "error that is a list": "failed mid-reply: (a JSON array)",
    "6 GB line without a newline": "sent a line longer than 8 MiB without ending it",
}
UNREPORTED = ('drafted_by_depth ["x"]', "drafted_by_depth [1e999]", "timings draft_n NaN")


def chat_with(case: str) -> tuple[subprocess.CompletedProcess[str], float]:
    with hostile_endpoint(case) as url:
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "app", "chat", "--endpoint", url, "--prompt", "Hi"],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=120,
        )
        return done, time.monotonic() - started


@pytest.mark.parametrize("case", sorted(REFUSED))
@pytest.mark.slow
def test_a_malformed_reply_is_one_line_naming_it(case: str) -> None:
    done, seconds = chat_with(case)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("mtp-studio: error: ") and REFUSED[case] in last, last
    assert len(last) < 400
    assert seconds < 60


@pytest.mark.parametrize("case", UNREPORTED)
@pytest.mark.slow
def test_statistics_that_are_not_counts_are_not_reported(case: str) -> None:
    done, _ = chat_with(case)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "Hello"
    stats = done.stderr.strip().splitlines()[-1]
    assert NO_ACCEPTANCE in stats, stats
