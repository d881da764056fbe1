"""The versions of the app and of the native parts it runs on, for Help → About and bug reports.

Read from the installed distributions' metadata, so asking costs no import of llama.cpp's or
mlx's native libraries (the GUI thread never loads them). A part that is not installed shows as
such rather than failing: mlx, for one, does not install on every platform.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import metadata

from app import __version__

NOT_INSTALLED = "not installed"


@dataclass(frozen=True)
class ComponentVersions:
    app: str
    pyside: str
    llama_cpp_python: str
    mlx: str
    mlx_lm: str

    def lines(self) -> list[tuple[str, str]]:
        return [
            ("MTP Studio", self.app),
            ("PySide6", self.pyside),
            ("llama-cpp-python (llama.cpp)", self.llama_cpp_python),
            ("mlx", self.mlx),
            ("mlx-lm", self.mlx_lm),
        ]


def _installed(*names: str) -> str:
    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return NOT_INSTALLED


def component_versions() -> ComponentVersions:
    return ComponentVersions(
        app=__version__,
        pyside=_installed("PySide6-Essentials", "PySide6"),
        llama_cpp_python=_installed("llama-cpp-python", "llama_cpp_python"),
        mlx=_installed("mlx"),
        mlx_lm=_installed("mlx-lm", "mlx_lm"),
    )
