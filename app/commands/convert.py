"""``mtp-studio convert``: an FP8 checkpoint folder → a BF16 copy mlx-lm can load.

The same job as the chat's "Convert for MLX…" action, recorded in the same job history.
Progress goes to stderr; stdout is the summary, whose last line is the loadable folder (or one
JSON object with ``--json``). A refused conversion (not FP8, output already there) is a
:class:`ConvertError` printed as one line with exit status 2, and leaves nothing behind.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from app.commands.progress import ProgressPrinter
from app.commands.recorded import run_recorded_command
from app.engine.convert.job import (
    DEFAULT_GROUP_SIZE,
    ConvertRequest,
    ConvertResult,
    default_output_folder,
)
from app.engine.convert.mlx_quantise import Q_BITS
from app.engine.settings import app_dirs


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "convert",
        help="convert an FP8 checkpoint to BF16 (optionally quantised for MLX)",
        description=(
            "Dequantise an FP8 block-quantised checkpoint folder (DeepSeek/Qwen -FP8 style, "
            "weight_scale_inv companions) to BF16 exactly, with the MTP extractor's dequantiser, "
            "and write it as safetensors with the same config minus quantization_config. With "
            "--q-bits, quantise that copy for MLX with mlx_lm.convert and keep the MTP head "
            "beside it as mtp.safetensors."
        ),
    )
    parser.add_argument("source", type=Path, metavar="FOLDER", help="the FP8 checkpoint folder")
    parser.add_argument(
        "--out",
        type=Path,
        metavar="FOLDER",
        help="folder to write (must not exist; default: <name>-bf16 or <name>-mlx-<bits>bit "
        "beside the source, or in the app's converted folder for a Hugging Face cache)",
    )
    parser.add_argument(
        "--q-bits",
        type=int,
        choices=Q_BITS,
        help="quantise for MLX with mlx_lm.convert at this many bits (default: stop at BF16)",
    )
    parser.add_argument(
        "--q-group-size",
        type=int,
        default=DEFAULT_GROUP_SIZE,
        help=f"elements per quantisation group (default {DEFAULT_GROUP_SIZE})",
    )
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    parser.set_defaults(func=run_convert)


def run_convert(args: argparse.Namespace) -> int:
    out = args.out
    if out is None:
        out = default_output_folder(args.source, args.q_bits, app_dirs().converted_models)
        out.parent.mkdir(parents=True, exist_ok=True)
    request = ConvertRequest(args.source, out, args.q_bits, args.q_group_size)
    result = run_recorded_command(
        request.spec(),
        request.run,
        ProgressPrinter(sys.stderr),
        "stopped with Ctrl-C; nothing was written — run it again",
    )
    assert isinstance(result, ConvertResult)
    print(json.dumps(result.to_json()) if args.json else summary_text(result))
    return 0


def summary_text(result: ConvertResult) -> str:
    target = f"MLX {result.q_bits}-bit" if result.q_bits else "BF16"
    lines = [
        f"converted to: {target}",
        f"tensors: {result.tensors} ({result.dequantised} dequantised from FP8)",
    ]
    if result.sidecar is not None:
        lines.append(f"MTP head: {result.sidecar}")
    lines.append(f"output: {result.location}")
    return "\n".join(lines)
