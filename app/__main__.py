"""Lets ``python -m app`` behave exactly like the ``mtp-studio`` console script."""

import sys

from app.cli import main

sys.exit(main())
