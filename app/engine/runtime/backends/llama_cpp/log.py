"""Keeps llama.cpp's log quiet and remembers its recent warnings and errors.

llama.cpp reports failures (a tensor missing, a context it cannot create) only as log lines and a
NULL return. The worker installs this sink once: nothing is printed on the user's terminal, and
an error raised for a NULL return quotes the lines that explain it.
"""

from __future__ import annotations

import collections
import ctypes

import llama_cpp

_WARN = 3
_ERROR = 4
_CONTINUATION = 5
_KEPT_LINES = 8

_recent: collections.deque[str] = collections.deque(maxlen=_KEPT_LINES)
_last_level_kept = False


@llama_cpp.llama_log_callback
def _sink(level: int, text: bytes, _user_data: ctypes.c_void_p) -> None:
    global _last_level_kept
    keep = level in (_WARN, _ERROR) or (level == _CONTINUATION and _last_level_kept)
    _last_level_kept = keep
    if keep and text:
        line = text.decode("utf-8", errors="replace").strip()
        if line:
            _recent.append(line)


def install() -> None:
    """Route llama.cpp's log to the in-memory sink (idempotent)."""
    llama_cpp.llama_log_set(_sink, ctypes.c_void_p(0))


def install_multimodal() -> None:
    """Route the log of llama.cpp's multimodal library (mtmd and its helpers) to the same sink."""
    import llama_cpp.mtmd_cpp as mtmd  # loads libmtmd: only when a projector is used

    mtmd.mtmd_helper_log_set(_sink, ctypes.c_void_p(0))


def take_recent() -> str:
    """The remembered warning/error lines, oldest first, then forget them."""
    lines = " | ".join(_recent)
    _recent.clear()
    return lines or "no message from llama.cpp"
