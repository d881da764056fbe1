"""The suite's share-out among pytest-xdist workers really keeps its groups together.

tests/workers.py puts each file's tests in one group and the tests that share a build in a named
one; pytest-xdist's ``--dist loadgroup`` is meant to send a group to one worker. With pytest 9.2
and pytest-xdist 3.8 it silently did not (pytest-dev/pytest-xdist#1386: xdist writes the group
into a node id field that pytest 9.2 no longer reads), so the bundle's build ran on both workers
and the Qt tests were spread over both. This runs a small suite of its own under ``-n 2 --dist
loadgroup`` with the project's grouping hook and checks which worker ran what.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[1]

_RECORDING_TEST = """
import json, os, pathlib
{marks}

def _record(name):
    out = pathlib.Path(os.environ["WORKER_RECORD"]) / f"{{__name__}}.{{name}}.json"
    out.write_text(json.dumps({{"module": __name__, "worker": os.environ["PYTEST_XDIST_WORKER"]}}))

{tests}
"""


def _write_module(folder: Path, name: str, count: int, group: str | None) -> None:
    marks = f'import pytest\npytestmark = pytest.mark.xdist_group("{group}")' if group else ""
    tests = "\n".join(f"def test_{i}():\n    _record({i})\n" for i in range(count))
    (folder / f"{name}.py").write_text(_RECORDING_TEST.format(marks=marks, tests=tests))


@pytest.mark.slow
def test_loadgroup_sends_each_file_and_each_named_group_to_one_worker(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    records = tmp_path / "records"
    records.mkdir()
    (suite / "conftest.py").write_text(
        "from tests.workers import pytest_collection_modifyitems  # noqa: F401\n"
    )
    _write_module(suite, "test_plain_file", 8, None)
    _write_module(suite, "test_shared_one", 4, "shared-build")
    _write_module(suite, "test_shared_two", 4, "shared-build")
    environment = {
        **os.environ,
        "WORKER_RECORD": str(records),
        "PYTHONPATH": os.pathsep.join(
            filter(None, [os.environ.get("PYTHONPATH"), str(REPOSITORY)])
        ),
        "PYTEST_ADDOPTS": "",
    }
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadgroup",
         "-p", "no:cacheprovider", "-p", "no:langsmith_plugin", str(suite)],
        cwd=suite, env=environment, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    workers: dict[str, set[str]] = {}
    for record in records.glob("*.json"):
        entry = json.loads(record.read_text())
        workers.setdefault(entry["module"], set()).add(entry["worker"])
    assert set(workers) == {"test_plain_file", "test_shared_one", "test_shared_two"}
    assert len(workers["test_plain_file"]) == 1, f"one file went to several workers: {workers}"
    shared = workers["test_shared_one"] | workers["test_shared_two"]
    assert len(shared) == 1, f"one named group went to several workers: {workers}"
