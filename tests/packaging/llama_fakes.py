"""A llama-cpp-python source package that builds in seconds, for testing what set-up does with it.

Its build runs as the real one does — ``pip wheel`` with ``CMAKE_ARGS`` in the environment, from
an index (a local folder with ``PIP_NO_INDEX``) — but instead of compiling llama.cpp it copies a
real, already built ``llama_cpp`` package and writes the flags it was given into
``llama_cpp/built_with.txt``. A CPU that faults on some of it is played by what the package is
made with:

- ``native_faults``: a wheel built without ``-DGGML_NATIVE=OFF`` kills its process by SIGILL on
  import, what ``-march=native`` code from a richer CPU does;
- ``faulty_variant``: ``llama_backend_init`` kills its process by SIGILL when that CPU variant of
  a portable build is the one loaded (forced by ``MTP_STUDIO_CPU_VARIANT``, or present and none
  forced: the test names the best one), what a VM that claims AMX does to the variant using it.

Everything else — the wheel cache, pip, the smoke run, the demo model, llama.cpp — is real.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
from importlib.metadata import version
from pathlib import Path

LLAMA_VERSION = "0.3.36"
DEPENDENCIES = ("typing-extensions", "numpy", "diskcache", "jinja2", "markupsafe")

_SETUP = r'''
import os
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

CARRIED = {carried!r}
NATIVE_FAULTS = {native_faults!r}
FAULTY_VARIANT = {faulty_variant!r}
NATIVE_FAULT = "import os, signal\nos.kill(os.getpid(), signal.SIGILL)\n"
VARIANT_FAULT = """
import os as _os, pathlib as _pathlib, signal as _signal
_real_backend_init = llama_backend_init


def llama_backend_init():
    forced = _os.environ.get("MTP_STUDIO_CPU_VARIANT")
    faulty = _pathlib.Path(__file__).parent / "lib" / "libggml-cpu-%s.so"
    if forced == "%s" or (not forced and faulty.exists()):
        _os.kill(_os.getpid(), _signal.SIGILL)
    _real_backend_init()
"""


class CopyTheRealPackage(build_py):
    def run(self):
        target = Path(self.build_lib) / "llama_cpp"
        ignore = shutil.ignore_patterns("__pycache__")
        shutil.copytree(CARRIED, target, ignore=ignore, dirs_exist_ok=True)
        flags = os.environ.get("CMAKE_ARGS", "")
        (target / "built_with.txt").write_text(flags)
        init = target / "__init__.py"
        if NATIVE_FAULTS and "-DGGML_NATIVE=OFF" not in flags:
            init.write_text(NATIVE_FAULT + init.read_text())
        if FAULTY_VARIANT:
            fault = VARIANT_FAULT % (FAULTY_VARIANT, FAULTY_VARIANT)
            init.write_text(init.read_text() + fault)


setup(
    name="llama_cpp_python",
    version="{version}",
    packages=["llama_cpp"],
    install_requires={requires!r},
    cmdclass={{"build_py": CopyTheRealPackage}},
)
'''


def fake_sdist(
    folder: Path,
    carried: Path,
    *,
    native_faults: bool = False,
    faulty_variant: str | None = None,
) -> Path:
    """``llama_cpp_python-<version>.tar.gz`` in ``folder``: a build that carries ``carried``."""
    source = folder / "src" / f"llama_cpp_python-{LLAMA_VERSION}"
    source.mkdir(parents=True)
    (source / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=64"]\nbuild-backend = "setuptools.build_meta"\n'
    )
    requires = [f"{name}>={version(name)}" for name in DEPENDENCIES[:4]]
    (source / "setup.py").write_text(
        _SETUP.format(
            carried=str(carried),
            native_faults=native_faults,
            faulty_variant=faulty_variant,
            version=LLAMA_VERSION,
            requires=requires,
        )
    )
    (source / "llama_cpp").mkdir()
    (source / "llama_cpp" / "__init__.py").write_text("")  # replaced by the carried package
    (source / "PKG-INFO").write_text(
        f"Metadata-Version: 2.1\nName: llama_cpp_python\nVersion: {LLAMA_VERSION}\n"
    )
    sdist = folder / f"llama_cpp_python-{LLAMA_VERSION}.tar.gz"
    with tarfile.open(sdist, "w:gz") as archive:
        archive.add(source, arcname=source.name)
    shutil.rmtree(folder / "src")
    return sdist


def wheelhouse(folder: Path) -> Path:
    """A folder pip can install from with no index: setuptools (for the fake's build) and the
    dependencies of llama-cpp-python, at the versions this environment runs."""
    folder.mkdir(parents=True, exist_ok=True)
    wanted = ["setuptools>=64", *(f"{name}=={version(name)}" for name in DEPENDENCIES)]
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--dest", str(folder), *wanted],
        check=True,
        timeout=600,
    )
    return folder
