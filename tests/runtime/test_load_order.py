"""llama.cpp's libraries load before numpy wherever a model is opened.

On a CUDA build, a model load in a process that imported numpy first dies by SIGSEGV (seen on
an H100, bench/device_check.sh; see app/engine/runtime/backends/llama_cpp/load_order.py). This
CPU machine cannot crash that way, so the tests check the order itself, in fresh interpreters
started the way the app starts them: the inference worker and ``serve``. The suite itself
loads them first only on a GPU machine (bench/device_check.sh runs pytest that way).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from app.engine.runtime.backends.choice import LLAMA_CPP, MLX
from app.engine.runtime.process import worker_entry

ROOT = Path(__file__).resolve().parents[2]
ORDER = (
    "names = list(sys.modules); "
    "print('llama_cpp.llama_cpp' in names and 'numpy' in names "
    "and names.index('llama_cpp.llama_cpp') < names.index('numpy'))"
)


def _python(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]  # after what the command printed


def test_the_worker_entry_names_the_backend_as_the_backend_choice_does() -> None:
    assert worker_entry.LLAMA_CPP == LLAMA_CPP


def test_importing_the_worker_entry_loads_neither_numpy_nor_llama_cpp() -> None:
    loaded = _python(
        "import sys; import app.engine.runtime.process.worker_entry; "
        "print(sorted({'numpy', 'llama_cpp'} & set(sys.modules)))"
    )
    assert loaded == "[]"


def test_a_llama_cpp_worker_loads_llama_cpp_before_numpy() -> None:
    order = _python(
        "import sys, multiprocessing; "
        "from app.engine.runtime.process.worker_entry import run_worker; "
        "ours, theirs = multiprocessing.Pipe(); ours.close(); "
        f"run_worker(theirs, {LLAMA_CPP!r}); {ORDER}"
    )
    assert order == "True"


def test_an_mlx_worker_does_not_load_llama_cpp() -> None:
    loaded = _python(
        "import sys, multiprocessing; "
        "from app.engine.runtime.process.worker_entry import run_worker; "
        "ours, theirs = multiprocessing.Pipe(); ours.close(); "
        f"run_worker(theirs, {MLX!r}); print('llama_cpp' in sys.modules)"
    )
    assert loaded == "False"


def test_serve_loads_llama_cpp_before_numpy() -> None:
    order = _python(
        "import sys; from app.cli import main; "
        'exec(\'try:\\n    main(["serve", "--help"])\\nexcept SystemExit:\\n    pass\'); '
        "import app.engine.server.core.prompt_check; " + ORDER
    )
    assert order == "True"
