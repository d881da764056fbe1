"""MTP extraction benchmark: ``python bench/bench_extract.py [--mtp-gb 2.2] [--rounds 2] [--json]``.

The same as ``mtp-studio bench extract`` (see app/engine/mtp/benchmark.py): generates a synthetic
FP8 checkpoint in a temporary folder, prints the I/O floor and extraction side by side with the
time ratio (target ≤ 2×) and peak RSS above the interpreter (target ≤ 300 MB), deletes it all.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", "extract", *sys.argv[1:]]))
