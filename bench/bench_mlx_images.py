"""Pictures on the MLX backend, side by side in one run: ``python bench/bench_mlx_images.py
[--model FOLDER] [--depth 3] [--tokens 64] [--repeats 5] [--json]``.

On the MLX vision demo by default (``resources/models/demo-vision-mlx``), in this process:

- **time to first token with one picture**, cold (encoded: the picture's preparation, the vision
  tower and the prompt) and reused (a follow-up about the same picture: nothing encoded; beside
  it the same follow-up run afresh), beside the same question without a picture;
- **decode tok/s and acceptance after a picture vs the same text without one**, plainly and with
  MTP at ``--depth`` (a prompt with a picture runs through mlx-vlm's language model, the same
  question without one through mlx-lm's trunk; the head drafts for both: docs/vision.md#mlx);
- **mlx-vlm's own ``generate``** on the same picture and question, its prompt and generation tok/s
  as it reports them.

Medians over ``--repeats``. Figures taken on a shared machine are noisy: compare rows of one run.
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.engine.runtime.backends.mlx.backend import MlxBackend  # noqa: E402
from app.engine.runtime.chat_format.images import ImageLimits, read_image  # noqa: E402
from app.engine.runtime.chat_format.prompting import ChatMessage, PlacedImage  # noqa: E402
from app.engine.runtime.core.backend import LoadSettings  # noqa: E402
from app.engine.runtime.core.demo_model import DEMO_VISION_MLX_DIR  # noqa: E402
from app.engine.runtime.core.request import GenerationRequest, GenerationResult  # noqa: E402
from app.engine.runtime.sampling.sampler import SamplerSettings  # noqa: E402
from app.engine.runtime.speculative.generation import generate  # noqa: E402
from tests.vision.conftest import picture  # noqa: E402

GREEDY = SamplerSettings(temperature=0)
QUESTION = "Describe the picture."
FOLLOW_UP = "Now in one line."
PICTURE_SIZE = (320, 240)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=DEMO_VISION_MLX_DIR)
    parser.add_argument("--depth", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    return parser.parse_args()


def _run(backend: MlxBackend, messages: tuple[ChatMessage, ...], **fields) -> GenerationResult:
    request = GenerationRequest(messages=messages, sampler=GREEDY, **fields)
    return generate(backend, request, emit=lambda _chunk: None, cancelled=lambda: False)


def _median(values: list[float]) -> float:
    return statistics.median(values)


def measure(args: argparse.Namespace) -> dict[str, object]:
    data = picture(*PICTURE_SIZE, seed=3)
    shown = read_image(data, ImageLimits(), "bench picture")
    with_picture = (ChatMessage("user", QUESTION, images=(PlacedImage(0, shown),)),)
    without = (ChatMessage("user", QUESTION),)
    backend = MlxBackend(args.model, LoadSettings(max_draft_depth=max(args.depth, 1)))
    rows: dict[str, list[GenerationResult]] = {
        "cold": [],
        "picture_mtp": [],
        "reused": [],
        "follow_up_fresh": [],
        "text": [],
        "text_mtp": [],
    }
    for _ in range(args.repeats):
        backend.reset()
        cold = _run(backend, with_picture, max_tokens=args.tokens, mtp_depth=0)
        follow_up = (
            *with_picture,
            ChatMessage("assistant", cold.text),
            ChatMessage("user", FOLLOW_UP),
        )
        rows["cold"].append(cold)
        backend.reset()
        rows["picture_mtp"].append(
            _run(backend, with_picture, max_tokens=args.tokens, mtp_depth=args.depth)
        )
        rows["reused"].append(_run(backend, follow_up, max_tokens=args.tokens, mtp_depth=0))
        backend.reset()
        rows["follow_up_fresh"].append(
            _run(backend, follow_up, max_tokens=args.tokens, mtp_depth=0)
        )
        backend.reset()
        rows["text"].append(_run(backend, without, max_tokens=args.tokens, mtp_depth=0))
        backend.reset()
        rows["text_mtp"].append(
            _run(backend, without, max_tokens=args.tokens, mtp_depth=args.depth)
        )
    backend.close()
    figures: dict[str, object] = {
        name: {
            "ttft_ms": round(_median([r.stats.ttft_seconds for r in runs]) * 1000, 1),
            "decode_tok_s": round(_median([r.stats.decode_tokens_per_second for r in runs]), 1),
            "prompt_tokens": runs[0].prompt_token_count,
            "images_encoded": runs[0].stats.prompt_images_encoded,
            "reused_tokens": runs[0].stats.prompt_reused_tokens,
            "mode": runs[0].stats.mode,
            "acceptance_by_depth": [round(rate, 3) for rate in runs[0].stats.acceptance_by_depth],
            "tokens_per_cycle": round(runs[0].stats.tokens_per_cycle or 0.0, 2),
        }
        for name, runs in rows.items()
    }
    figures["mlx_vlm_generate"] = _mlx_vlm_reference(args, data)
    return figures


def _mlx_vlm_reference(args: argparse.Namespace, data: bytes) -> dict[str, float]:
    from mlx_vlm import generate as vlm_generate
    from mlx_vlm import load as vlm_load
    from PIL import Image

    model, processor = vlm_load(str(args.model))
    image = Image.open(io.BytesIO(data)).convert("RGB")
    prompt = (
        "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>"
        f"{QUESTION}<|im_end|>\n<|im_start|>assistant\n"
    )
    results = [
        vlm_generate(
            model, processor, prompt, image=[image], max_tokens=args.tokens, temperature=0.0
        )
        for _ in range(args.repeats)
    ]
    return {
        "prompt_tok_s": round(_median([r.prompt_tps for r in results]), 1),
        "decode_tok_s": round(_median([r.generation_tps for r in results]), 1),
    }


def main() -> None:
    args = parse_args()
    figures = measure(args)
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(f"{args.model.name}, {args.tokens} tokens, {args.repeats} repeats (medians)")
    for name, row in figures.items():
        print(f"  {name:18} {row}")


if __name__ == "__main__":
    main()
