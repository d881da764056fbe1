"""The Models library's Qt-free core: every model on disk, its size and MTP status, and deleting it.

:mod:`~app.engine.library.inventory` lists what the chat's discovery finds with what a library
shows (location, format, quantisation, real size on disk, MTP status);
:mod:`~app.engine.library.deletion` plans a deletion with the bytes it frees, then carries it out.
"""
