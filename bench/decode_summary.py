"""The few lines of a ``bench decode --json`` result that a device report needs.

bench/vulkan_lavapipe.sh and bench/device_check.sh run ``bench decode --json`` on a build of
llama.cpp they made and print this summary in their report: whether greedy MTP output equals
plain decoding, each mode's speed and acceptance by depth, the target checks, and any backend
whose drafts were found broken.

    python bench/decode_summary.py DECODE.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def summary(result: dict) -> list[str]:
    greedy = result["greedy_identical"]
    lines = [
        f"model {result['model']} · backend {result['backend']}",
        "greedy MTP identical to plain decoding: "
        + ", ".join(f"{mode} {'yes' if same else 'NO'}" for mode, same in greedy.items()),
        f"{'mode':<22}{'tok/s':>8}{'speedup':>9}  acceptance by depth",
    ]
    for mode in result["modes"]:
        acceptance = " / ".join(f"{rate:.1%}" for rate in mode["acceptance_by_depth"]) or "—"
        lines.append(
            f"{mode['label']:<22}{mode['decode_tokens_per_second']:>8.1f}"
            f"{mode['speedup']:>8.2f}×  {acceptance}"
        )
    lines += [f"[{'ok' if met else 'MISSED'}] {name}" for name, met in result["checks"].items()]
    if result.get("draft_health"):
        lines.append(f"DRAFTS BROKEN: {result['draft_health']}")
    return lines


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python bench/decode_summary.py DECODE.json", file=sys.stderr)
        return 2
    try:
        result = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        print(f"decode_summary: cannot read {argv[0]}: {error}", file=sys.stderr)
        return 1
    print("\n".join(summary(result)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
