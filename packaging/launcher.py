"""Entry point of the frozen (PyInstaller) app: the same CLI and window as ``mtp-studio``.

A frozen executable re-runs itself for every ``spawn``-ed child (the inference worker, the
accelerator probe); ``freeze_support`` makes such a child run its target instead of the CLI.
Before Qt loads, the desktop-library check turns Qt's "could not load the Qt platform plugin"
abort into a message that names the package to install.
"""

import multiprocessing
import sys

if __name__ == "__main__":
    multiprocessing.freeze_support()
    from app.cli import main

    sys.exit(main())
