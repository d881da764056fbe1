"""Issue 23: ``packaging/build.sh`` run before ``setup.sh`` says what to do, in one line, exit 2.

It used to fail with ".venv/Scripts/python.exe: No such file" (the Windows fallback's path) on
every OS. The real script runs here from a copy of the repository's packaging folder with no
``.venv`` beside it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_build_before_setup_is_one_clear_line(tmp_path: Path) -> None:
    # not packaging/build: the bundle's build output, which a bundle build may be rewriting
    shutil.copytree(
        ROOT / "packaging", tmp_path / "packaging", ignore=shutil.ignore_patterns("build")
    )
    env = {key: value for key, value in os.environ.items() if key != "PY"}
    done = subprocess.run(
        ["bash", "packaging/build.sh"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "build: no Python environment at .venv (nor $PY); run 'bash packaging/setup.sh' "
        "first, or set PY=/path/to/python"
    ]
    assert not (tmp_path / "dist").exists()
