"""Decode benchmark: ``python bench/bench_decode.py [--model PATH] [--depths 1,2,3] [--json]``.

The same as ``mtp-studio bench decode`` (see app/engine/runtime/bench/decode_bench.py): plain
decoding, MTP with Leviathan–Chen acceptance and MTP with sample-and-compare over a fixed prompt set
in one run, printing tok/s, TTFT, acceptance by depth, the draft/verify cost ratio c, the speedup
and Leviathan's expected speedup side by side, with the targets.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", "decode", *sys.argv[1:]]))
