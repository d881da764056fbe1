"""The app's log file: where tracebacks go instead of dialogs, and never a token.

One rotating file in the platformdirs log folder. A filter masks anything that looks like a Hub
token before a record is written, as a second line of defence behind "never log the token".
The log holds prompts' errors and paths, so it and its rotated copies are created 0600 (an older
world-readable one is narrowed when opened).
"""

from __future__ import annotations

import logging
import os
from logging.handlers import RotatingFileHandler
from pathlib import Path
from typing import TextIO

from app.engine.credentials import mask_credentials

LOG_FILE_NAME = "mtp-studio.log"


class TokenMask(logging.Filter):
    """Masks Hub tokens (``hf_…``) and credentials in URLs in the formatted message."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = mask_credentials(message)
        if masked != message:
            record.msg = masked
            record.args = None
        return True


class PrivateRotatingFileHandler(RotatingFileHandler):
    """A rotating log whose files only their owner can read."""

    def _open(self) -> TextIO:
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        if hasattr(os, "fchmod"):  # not on Windows, where the mode bits do not apply
            os.fchmod(fd, 0o600)
        return os.fdopen(fd, "a", encoding=self.encoding, errors=self.errors)


def configure_logging(log_dir: Path) -> Path:
    """Send INFO and above to ``log_dir/mtp-studio.log``; return the file's path."""
    log_dir.mkdir(parents=True, exist_ok=True)
    path = log_dir / LOG_FILE_NAME
    handler = PrivateRotatingFileHandler(path, maxBytes=2_000_000, backupCount=3, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(TokenMask())
    root = logging.getLogger()
    for existing in list(root.handlers):
        if isinstance(existing, RotatingFileHandler):
            root.removeHandler(existing)
            existing.close()
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    return path
