"""The Models page (PySide6): the library of models on disk, see :mod:`app.ui.library.page`."""

from app.ui.library.page import LibraryPage

__all__ = ["LibraryPage"]
