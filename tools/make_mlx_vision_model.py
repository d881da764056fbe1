"""Make a tiny MLX vision model with its MTP head, for testing images on the MLX backend offline.

The llama.cpp vision demo ships as GGUF files only; the MLX backend reads a model folder, and its
images go through mlx-vlm's model classes. This script makes such a folder the way a user gets
one: a Qwen3.5 multimodal release (``Qwen3_5ForConditionalGeneration``: trunk, MTP layer and
vision tower, written by ``demo_model.vision`` exactly as for the GGUF demo) converted by
**mlx-vlm's own converter** (``mlx_vlm.convert``), with the release's ``mtp.*`` tensors kept
beside it as ``mtp.safetensors`` (mlx-vlm's converter drops them, as mlx-lm's does).

The trunk has the vision demo's shape (hidden 128, 4 layers: 3 gated-delta-net + 1 full attention,
1 MTP layer; the demo BPE plus Qwen's vision tokens), seeded and trained jointly with its head for
``--steps`` (150; ~6 minutes on one thread) on the demo corpus, so that greedy choices are well
separated and the head's acceptance after a picture means something. ``--steps 0`` keeps it
untrained; its next-token distribution is then nearly flat, so ``--logit-scale`` (1 by default)
can sharpen it. The vision tower is transformers' seeded initialisation, untrained, as in the GGUF
demo. The language model is quantised to 8 bits by the converter (``--bits 0`` keeps BF16); the
folder is ~3.4 MB.

Usage (needs the `train` and `vision-mlx` extras: pip install -e .[train,vision-mlx]):

  .venv/bin/python tools/make_mlx_vision_model.py --out DIR [--steps N] [--seed S]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch
from demo_model.corpus import build_corpus
from demo_model.files import publish, staging_path
from demo_model.model import DemoMtpModel, ModelShape, text_config
from demo_model.tokenizer import END_OF_TEXT, IM_END, chat_text, special_token_id
from demo_model.train import TrainSettings, train
from demo_model.vision import (
    VISION_TOKENS,
    VisionShape,
    random_vision_tower,
    vision_config,
    vision_tokenizer,
    write_vision_checkpoint,
)
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer

REPO = Path(__file__).resolve().parents[1]
BASE_TOKENIZER = REPO / "resources" / "models" / "demo-mtp-hf" / "tokenizer.json"
SIDECAR_FILE = "mtp.safetensors"
REPORT_FILE = "mlx_vision_report.json"
SHAPE = ModelShape(
    vocab_size=4096 + len(VISION_TOKENS),
    hidden_size=128,
    intermediate_size=384,
    num_hidden_layers=4,
    num_attention_heads=2,
    num_key_value_heads=1,
    head_dim=64,
    linear_num_heads=2,
    linear_head_dim=64,
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="the MLX model folder to write")
    parser.add_argument(
        "--steps", type=int, default=0, help="training steps (0: seeded, untrained)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--logit-scale", type=float, default=1.0, help="lm_head scale (sharper next tokens)"
    )
    parser.add_argument(
        "--bits", type=int, default=8, help="quantise the language model (0: keep BF16)"
    )
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    return parser.parse_args(argv)


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def trunk_model(tokenizer: Tokenizer, steps: int, seed: int, logit_scale: float) -> DemoMtpModel:
    """The demo-shaped Qwen3.5 trunk + MTP layer: seeded, trained ``steps`` steps when asked,
    its output layer scaled by ``logit_scale``."""
    torch.manual_seed(seed)
    end_of_text = special_token_id(tokenizer, END_OF_TEXT)
    im_end = special_token_id(tokenizer, IM_END)
    model = DemoMtpModel(text_config(SHAPE, eos_token_id=im_end, pad_token_id=end_of_text))
    if steps > 0:
        corpus = build_corpus()
        texts = [chat_text([("user", p.request), ("assistant", p.answer)]) for p in corpus.train]
        docs = [[*e.ids, end_of_text] for e in tokenizer.encode_batch(texts)]
        train(model, docs, TrainSettings(steps=steps, seed=seed), lambda _entry: None)
    with torch.no_grad():
        model.trunk.lm_head.weight.mul_(logit_scale)
        for parameter in model.parameters():
            parameter.copy_(parameter.to(torch.bfloat16).float())
    return model


def write_head_sidecar(release: Path, destination: Path) -> int:
    """The release's ``mtp.*`` tensors as the sidecar the MLX backend reads; their count."""
    tensors = {
        name: value
        for name, value in load_file(str(release / "model.safetensors")).items()
        if name.startswith("mtp.")
    }
    if not tensors:
        raise SystemExit(f"{release} has no mtp.* tensors; the release writer changed")
    save_file(tensors, str(destination), metadata={"format": "pt"})
    return len(tensors)


def make(
    out: Path, steps: int = 150, seed: int = 0, logit_scale: float = 1.0, bits: int = 8
) -> Path:
    """Write the MLX vision model folder ``out`` (replaced only once complete)."""
    from mlx_vlm.convert import convert

    tokenizer = vision_tokenizer(Tokenizer.from_file(str(BASE_TOKENIZER)))
    model = trunk_model(tokenizer, steps, seed, logit_scale)
    vision = vision_config(VisionShape(), out_hidden_size=SHAPE.hidden_size)
    visual = random_vision_tower(vision, seed)
    staging = staging_path(out)
    with tempfile.TemporaryDirectory() as scratch:
        release = Path(scratch) / "hf"
        write_vision_checkpoint(model, visual, vision, tokenizer, release)
        _log("converting with mlx-vlm's converter")
        if bits:
            convert(str(release), mlx_path=str(staging), quantize=True, q_bits=bits)
        else:
            convert(str(release), mlx_path=str(staging), dtype="bfloat16")
        head_tensors = write_head_sidecar(release, staging / SIDECAR_FILE)
        (staging / SIDECAR_FILE).chmod(0o644)
    report = {
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "trunk": {"shape": SHAPE.__dict__, "training_steps": steps, "seed": seed},
        "logit_scale": logit_scale,
        "language_model_bits": bits or "bf16",
        "vision_tower": {"trained": False, "seed": seed},
        "head_tensors": head_tensors,
        "converter": "mlx_vlm.convert",
    }
    (staging / REPORT_FILE).write_text(json.dumps(report, indent=2) + "\n")
    out.parent.mkdir(parents=True, exist_ok=True)
    publish(staging, out)
    return out


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    started = time.monotonic()
    out = make(args.out, args.steps, args.seed, args.logit_scale, args.bits)
    size = sum(f.stat().st_size for f in out.iterdir() if f.is_file())
    _log(f"done in {time.monotonic() - started:.0f}s: {out} ({size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
