"""MTP Studio: publish, download and run Multi-Token-Prediction language models.

The package is split in two: ``app.engine`` holds all the work and never imports Qt, so the CLI,
tests and headless servers can use it; ``app.ui`` is the PySide6 front end over the same engine.
"""

__version__ = "0.1.0"
TOOL_NAME = "mtp-studio"
