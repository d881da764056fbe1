"""Issue 34: ``search``, ``get`` and ``graft`` against a Hub (the local test hub) that lies.

A ``config.json`` holding ``NaN``/``Infinity``, nested 200,000 deep or larger than the cap no
longer ends the whole search in a traceback (the fit falls back to the file's size), and an
oversized one is never downloaded whole, even when the listing lies about its size. File names
with terminal escapes are printed inert, a name too long for the file system is refused with the
reason, unrelated files that share a label are not "2 parts", a split named ``-00001-of-99999``
gives one short line, and ``--limit -1`` is a one-line error. The CLI runs as a user runs it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.engine.chat.model_files import describe_model
from app.engine.errors import GraftError
from app.engine.graft.split import join_split_gguf
from app.engine.hub.search import RepoHit, SearchQuery, search_models
from app.engine.hub.small_file import MAX_SMALL_FILE_BYTES
from tests.graft.bases import DEMO_GGUF
from tests.localhub import LocalHub
from tests.store.isolation import IsolatedHome

ROOT = Path(__file__).resolve().parents[2]
GGUF = b"GGUF" + bytes(100)
GIB = 1 << 30


def cli(home: IsolatedHome, *args: str) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "MTP_STUDIO_HOME": str(home.root / "mtp-studio"), "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "app", *args], cwd=ROOT, env=env, capture_output=True, timeout=180
    )


def one_hit(hub: LocalHub, repo: str) -> RepoHit:
    result = search_models(
        SearchQuery(repo), endpoint=hub.endpoint, token=None, sidecars={}, memory_bytes=64 * GIB
    )
    [hit] = result.hits
    return hit


@pytest.mark.parametrize(
    "config",
    [
        b'{"hidden_size": Infinity, "num_hidden_layers": NaN, "vocab_size": 1e300}',
        b"[" * 200_000 + b"]" * 200_000,
        b'{"hidden_size": 4096, "pad": "' + b"x" * (MAX_SMALL_FILE_BYTES + 10) + b'"}',
    ],
    ids=["nan-and-infinity", "nested-200k", "past-the-cap"],
)
def test_a_config_that_lies_leaves_the_fit_to_the_file_size(
    local_hub: LocalHub, config: bytes
) -> None:
    local_hub.seed_files("evil/config-GGUF", {"config.json": config, "m-Q4_K_M.gguf": GGUF})
    hit = one_hit(local_hub, "evil/config")
    [option] = hit.quantisations
    assert option.label == "Q4_K_M" and option.fit.context == 0  # judged on the file alone
    assert local_hub.traffic.bytes_served("evil/config-GGUF", "config.json") <= (
        MAX_SMALL_FILE_BYTES + 2**20
    )


def test_a_config_larger_than_the_cap_is_not_fetched_even_when_listed_small(
    local_hub: LocalHub,
) -> None:
    big = b'{"pad": "' + b"x" * (3 * MAX_SMALL_FILE_BYTES) + b'"}'
    local_hub.seed_files("evil/big-GGUF", {"config.json": big, "m-Q4_K_M.gguf": GGUF})
    one_hit(local_hub, "evil/big")
    assert local_hub.traffic.bytes_served("evil/big-GGUF", "config.json") == 0, "listed size"
    local_hub.traffic.reset()
    local_hub.forge_listing("evil/big-GGUF", "config.json", size=100)
    one_hit(local_hub, "evil/big")
    served = local_hub.traffic.bytes_served("evil/big-GGUF", "config.json")
    assert served < 2 * MAX_SMALL_FILE_BYTES, f"{served} bytes read of a lying 12 MiB file"


def test_names_with_terminal_escapes_are_printed_inert(
    local_hub: LocalHub, home: IsolatedHome
) -> None:
    local_hub.seed_files("evil/ansi-GGUF", {"x\x1b]0;PWNED\x07\x1b[2J.gguf": GGUF})
    done = cli(home, "search", "evil/ansi")
    assert done.returncode == 0, done.stderr
    assert b"\x1b" not in done.stdout + done.stderr and b"\x07" not in done.stdout
    assert b"x\\x1b]0;PWNED\\x07\\x1b[2J" in done.stdout


def test_files_that_only_share_a_label_are_separate_quantisations(local_hub: LocalHub) -> None:
    files = {"alpha-Q4_K_M.gguf": GGUF, "beta/other-Q4_K_M.gguf": GGUF + b"x"}
    local_hub.seed_files("evil/twins-GGUF", files)
    hit = one_hit(local_hub, "evil/twins")
    assert [(q.label, q.files) for q in hit.quantisations] == [
        ("alpha-Q4_K_M", ("alpha-Q4_K_M.gguf",)),
        ("beta/other-Q4_K_M", ("beta/other-Q4_K_M.gguf",)),
    ]


def test_a_name_too_long_for_the_file_system_is_refused_with_the_reason(
    local_hub: LocalHub, home: IsolatedHome
) -> None:
    local_hub.seed_files("evil/long-GGUF", {"a" * 240 + "-Q4_K_M.gguf": GGUF})
    done = cli(home, "get", "evil/long-GGUF", "--quant", "Q4_K_M")
    assert done.returncode == 2, done.stderr
    last = done.stderr.decode().strip().splitlines()[-1]
    assert "it has a name of 252 bytes; names over 200 bytes are refused" in last
    assert b"Traceback" not in done.stderr


def test_a_bad_limit_is_one_line(local_hub: LocalHub, home: IsolatedHome) -> None:
    done = cli(home, "search", "evil", "--limit", "-1")
    assert done.returncode == 2
    assert done.stderr.decode().strip() == (
        "mtp-studio: error: --limit -1 is invalid: use 1 to 500 repos"
    )


@pytest.mark.slow
def test_a_split_of_99999_parts_is_one_short_line(tmp_path: Path) -> None:
    """``get`` joins a split base before grafting, and the chat's model picker describes it: both
    name the missing parts — three of them, not 99,998 (a 3 MB line, stored twice in the job
    history)."""
    first = tmp_path / "m-Q4_K_M-00001-of-99999.gguf"
    first.write_bytes(DEMO_GGUF.read_bytes())
    with pytest.raises(GraftError) as caught:
        join_split_gguf(first, tmp_path / "joined.gguf")
    message = str(caught.value)
    assert "99,998 of the 99,999 parts of m-Q4_K_M-00001-of-99999.gguf are missing" in message
    assert "m-Q4_K_M-00002-of-99999.gguf" in message and "and 99,995 more" in message
    assert len(message) < 400
    problem = describe_model(first).problem or ""
    assert "99,998 of them" in problem and "and 99,995 more" in problem and len(problem) < 400
