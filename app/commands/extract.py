"""``mtp-studio extract``: write the MTP heads of a local checkpoint folder as a BF16 sidecar.

Progress goes to stderr (so stdout stays the summary, or one JSON object with ``--json``, for
scripts); any problem with the checkpoint is an :class:`ExtractError` that the CLI prints as one
line with exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from app.commands.progress import ProgressPrinter
from app.engine.jobs import JobContext
from app.engine.mtp import ExtractResult, LocalFolderSource, extract_mtp
from app.engine.units import format_bytes, format_rate


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "extract",
        help="extract the MTP heads of a checkpoint into a BF16 sidecar file",
        description=(
            "Find the MTP head tensors of a local safetensors checkpoint (Qwen mtp.*, DeepSeek/GLM "
            "NextN layers, MiMo), dequantise them to BF16 and write them to one safetensors file."
        ),
    )
    parser.add_argument(
        "--source",
        required=True,
        type=Path,
        metavar="PATH",
        help="checkpoint folder (config.json + model.safetensors[.index.json] and shards)",
    )
    parser.add_argument(
        "--out", required=True, type=Path, metavar="FILE", help="sidecar to write (.safetensors)"
    )
    parser.add_argument(
        "--allow-partial",
        action="store_true",
        help=(
            "when the checkpoint lacks some MTP layers its config declares, extract the layers "
            "present (recorded in the sidecar) instead of failing"
        ),
    )
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    parser.set_defaults(func=run_extract)


def run_extract(args: argparse.Namespace) -> int:
    source = LocalFolderSource(args.source)
    result = extract_mtp(
        source,
        args.out,
        JobContext(emit=ProgressPrinter(sys.stderr)),
        allow_partial=args.allow_partial,
    )
    if args.json:
        print(json.dumps(result.to_json()))
    else:
        print(summary_text(result))
    return 0


def summary_text(result: ExtractResult) -> str:
    rate = result.bytes_read / result.seconds if result.seconds else 0.0
    return "\n".join(
        [
            f"layout: {result.layout} (layers {', '.join(map(str, result.layer_indices))})",
            f"family: {result.family}",
            *(
                [f"missing layers: {', '.join(map(str, result.missing_layers))} (partial)"]
                if result.missing_layers
                else []
            ),
            f"tensors: {result.tensor_count}",
            f"bytes read: {format_bytes(result.bytes_read)} ({result.bytes_read} B; "
            f"{result.bytes_needed} B needed)",
            f"bytes written: {format_bytes(result.bytes_written)} ({result.bytes_written} B)",
            f"seconds: {result.seconds:.2f} ({format_rate(rate)} read)",
            f"sha256: {result.sha256}",
            f"output: {result.out_path}",
        ]
    )
