"""The chat window (PySide6): local chat with live MTP statistics, see :mod:`app.ui.chat.window`."""

from app.ui.chat.window import ChatWindow

__all__ = ["ChatWindow"]
