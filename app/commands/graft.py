"""``mtp-studio graft``: add a sidecar's MTP head to a GGUF of its base model.

The same job as the GUI's "Add the MTP head" action, recorded in the same job history. Progress
goes to stderr, so stdout stays the summary (or one JSON object with ``--json``); a refused graft
(another model's sidecar, a base that already has a head, a damaged file, too little space) is a
:class:`GraftError` that the CLI prints as one line with exit status 2, and leaves no output file.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from app.commands.progress import ProgressPrinter
from app.commands.recorded import run_recorded_command
from app.engine.graft import HEAD_TYPES, GraftRequest, GraftResult
from app.engine.units import format_bytes


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "graft",
        help="add a sidecar's MTP head to a GGUF so llama.cpp can draft with it",
        description=(
            "Write a copy of a GGUF with the MTP head of a sidecar (mtp.safetensors) appended as "
            "its nextn block, named and transformed as llama.cpp's converter does. The base's "
            "tensors are copied as they are; the head is stored as --head-type."
        ),
    )
    parser.add_argument("--base", required=True, type=Path, metavar="GGUF", help="base model")
    parser.add_argument(
        "--sidecar",
        required=True,
        type=Path,
        metavar="FILE",
        help="mtp.safetensors of the model, or the separate head file (mtp-*.gguf) converted "
        "beside this trunk, whose tensors are copied as they are",
    )
    parser.add_argument("--out", required=True, type=Path, metavar="GGUF", help="file to write")
    parser.add_argument(
        "--head-type",
        choices=sorted(HEAD_TYPES),
        default="q8_0",
        help="storage of the head's matrices (default q8_0; norms stay F32)",
    )
    parser.add_argument(
        "--replace", action="store_true", help="replace the MTP head the base already has"
    )
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    parser.set_defaults(func=run_graft)


def run_graft(args: argparse.Namespace) -> int:
    request = GraftRequest(args.base, args.sidecar, args.out, args.head_type, args.replace)
    result = run_recorded_command(
        request.spec(),
        request.run,
        ProgressPrinter(sys.stderr),
        "stopped with Ctrl-C; nothing was written — run it again",
    )
    assert isinstance(result, GraftResult)
    print(json.dumps(result.to_json()) if args.json else summary_text(result))
    return 0


def summary_text(result: GraftResult) -> str:
    replaced = f" (replaced {result.replaced_blocks})" if result.replaced_blocks else ""
    return "\n".join(
        [
            f"architecture: {result.architecture}",
            f"blocks: {result.trunk_blocks} trunk + {result.head_blocks} MTP{replaced}",
            f"head: {result.head_tensors} tensors, {format_bytes(result.head_bytes)} as "
            f"{result.head_type}, norms {result.norm_style}",
            f"bytes written: {format_bytes(result.bytes_written)} ({result.bytes_written} B)",
            f"seconds: {result.seconds:.2f}",
            f"output: {result.out_path}",
        ]
    )
