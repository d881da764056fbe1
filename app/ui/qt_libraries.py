"""Checks, before Qt starts, that the Linux desktop has the system libraries Qt's xcb plugin needs.

Without them Qt aborts with "could not load the Qt platform plugin "xcb"" and a list of plugin
names, which tells a user nothing about what to install (the usual culprit since Qt 6.5 is
``libxcb-cursor0``). This module deliberately imports no Qt: it runs before the first Qt call
and, when a library is missing, says which package provides it (apt and dnf names).
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SystemLibrary:
    soname: str
    apt: str
    dnf: str


XCB_LIBRARIES = (
    SystemLibrary("libxcb-cursor.so.0", "libxcb-cursor0", "xcb-util-cursor"),
    SystemLibrary("libxkbcommon-x11.so.0", "libxkbcommon-x11-0", "libxkbcommon-x11"),
    SystemLibrary("libxcb-icccm.so.4", "libxcb-icccm4", "xcb-util-wm"),
    SystemLibrary("libxcb-keysyms.so.1", "libxcb-keysyms1", "xcb-util-keysyms"),
    SystemLibrary("libxcb-image.so.0", "libxcb-image0", "xcb-util-image"),
    SystemLibrary("libxcb-render-util.so.0", "libxcb-render-util0", "xcb-util-renderutil"),
    SystemLibrary("libxcb-shape.so.0", "libxcb-shape0", "libxcb"),
    SystemLibrary("libEGL.so.1", "libegl1", "libglvnd-egl"),
    SystemLibrary("libfontconfig.so.1", "libfontconfig1", "fontconfig"),
)


def loads(soname: str) -> bool:
    """True when the dynamic loader can open ``soname``, or a frozen bundle carries it."""
    bundle = getattr(sys, "_MEIPASS", None)
    if bundle is not None and any(Path(bundle).rglob(soname)):
        return True
    try:
        ctypes.CDLL(soname)
    except OSError:
        return False
    return True


def uses_xcb(environ: dict[str, str], platform: str = sys.platform) -> bool:
    """Whether Qt will pick its xcb (X11) plugin here."""
    if not platform.startswith("linux"):
        return False
    chosen = environ.get("QT_QPA_PLATFORM", "")
    if chosen:
        return chosen.split(":")[0].split(";")[0] == "xcb"
    wayland = environ.get("XDG_SESSION_TYPE") == "wayland" and environ.get("WAYLAND_DISPLAY")
    return not wayland


def missing_libraries(can_load: Callable[[str], bool] = loads) -> list[SystemLibrary]:
    return [library for library in XCB_LIBRARIES if not can_load(library.soname)]


def missing_libraries_message(missing: list[SystemLibrary]) -> str:
    names = ", ".join(library.soname for library in missing)
    apt = " ".join(library.apt for library in missing)
    dnf = " ".join(sorted({library.dnf for library in missing}))
    pronoun = "it" if len(missing) == 1 else "them"
    return (
        f"MTP Studio cannot open its window: this system lacks {names}, which Qt needs to draw "
        f"on an X11 desktop.\nInstall {pronoun}, then start MTP Studio again:\n"
        f"  Debian/Ubuntu: sudo apt install {apt}\n"
        f"  Fedora/RHEL:   sudo dnf install {dnf}\n"
        "(The command line works without it: mtp-studio --help.)"
    )


def check_desktop_libraries(environ: dict[str, str] | None = None) -> str | None:
    """The message to show instead of Qt's abort, or None when Qt can start."""
    environ = dict(os.environ) if environ is None else environ
    if not uses_xcb(environ):
        return None
    missing = missing_libraries()
    return missing_libraries_message(missing) if missing else None
