"""Make the tiny vision MTP model that ships with MTP Studio and check it in llama.cpp.

Images must be testable offline, with no Hub, and through the same files users run: a Qwen3.5
trunk GGUF with its nextn (MTP) block and the ``mmproj-*.gguf`` projector beside it. Qwen3.5 is
the one architecture for which the pinned llama.cpp has both an MTP graph (``qwen35``) and a
vision projector (``clip``, projector type ``qwen3vl_merger``), from one checkpoint by one
converter.

One run, deterministic for a given seed, thread count and Python version:

  demo BPE + Qwen's vision tokens → a small Qwen3.5 trunk + MTP layer trained jointly on the
  demo corpus → a random (seeded, untrained) Qwen3.5 vision tower → one multimodal HF release
  → llama.cpp's converter: trunk GGUF (Q8_0) and projector (``--mmproj``, F16)
  → checks: transformers reloads the release; the GGUF's text logits match PyTorch; llama.cpp
  loads both files and its multimodal library (mtmd) evaluates an image into a context
  → resources/models/demo-vision/ (vision_report.json says what was measured)

Usage (needs the `train` extra: pip install -e .[train]):

  .venv/bin/python tools/make_vision_model.py               # full run (~25 minutes, 1 thread)
  .venv/bin/python tools/make_vision_model.py --steps 20    # a quick smoke run
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import torch
import transformers
from demo_model import evaluate, export_gguf, verify_gguf
from demo_model.corpus import build_corpus
from demo_model.files import publish, staging_path
from demo_model.model import DemoMtpModel, ModelShape, text_config
from demo_model.tokenizer import END_OF_TEXT, IM_END, chat_text, special_token_id
from demo_model.train import TrainLog, TrainSettings, train
from demo_model.vision import (
    VISION_TOKENS,
    VisionShape,
    random_vision_tower,
    reload_difference,
    vision_config,
    vision_tokenizer,
    write_vision_checkpoint,
)
from tokenizers import Tokenizer

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the app's engine, for the llama.cpp check

from demo_model.verify_vision import check_image_evaluation  # noqa: E402

OUT_DIR = REPO / "resources" / "models" / "demo-vision"
MODEL_NAME = "MTP Studio vision demo (Qwen3.5 + MTP + vision)"
GGUF_NAME = "demo-vision-Q8_0.gguf"
PROJECTOR_NAME = "mmproj-demo-vision-F16.gguf"
REPORT_NAME = "vision_report.json"
BASE_TOKENIZER = REPO / "resources" / "models" / "demo-mtp-hf" / "tokenizer.json"
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
VISION = VisionShape()
COMPARE_POSITIONS = 512


def parse_args() -> argparse.Namespace:
    defaults = TrainSettings(steps=400)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT_DIR)
    parser.add_argument("--steps", type=int, default=defaults.steps)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument(
        "--threads", type=int, default=1, help="torch threads; results depend on it"
    )
    parser.add_argument("--eval-prompts", type=int, default=16)
    parser.add_argument(
        "--keep-hf",
        type=Path,
        default=None,
        help="also keep the multimodal HF release in this folder (for mlx-vlm or transformers)",
    )
    parser.add_argument(
        "--llama-cpp-cache",
        type=Path,
        default=Path.home() / ".cache" / "mtp-studio" / "llama-cpp-src",
        help="where the llama-cpp-python sdist (for its GGUF converter) is fetched and unpacked",
    )
    return parser.parse_args()


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def _log_step(entry: TrainLog) -> None:
    if entry.step % 50 == 0:
        _log(f"step {entry.step}: trunk {entry.trunk_loss:.3f} mtp {entry.mtp_loss:.3f}")


def _round_to_bf16(model: DemoMtpModel) -> None:
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(parameter.to(torch.bfloat16).float())


def _file_entry(path: Path) -> dict[str, object]:
    return {
        "path": path.name,
        "bytes": path.stat().st_size,
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
    }


def main() -> None:
    args = parse_args()
    started = time.monotonic()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    settings = TrainSettings(steps=args.steps, seed=args.seed)

    _log("building the corpus and the tokenizer (the demo's BPE + Qwen's vision tokens)")
    corpus = build_corpus()
    tokenizer = vision_tokenizer(Tokenizer.from_file(str(BASE_TOKENIZER)))
    end_of_text = special_token_id(tokenizer, END_OF_TEXT)
    im_end = special_token_id(tokenizer, IM_END)
    texts = [chat_text([("user", p.request), ("assistant", p.answer)]) for p in corpus.train]
    held = [chat_text([("user", p.request), ("assistant", p.answer)]) for p in corpus.held_out]
    train_docs = [[*e.ids, end_of_text] for e in tokenizer.encode_batch(texts)]
    held_docs = [[*e.ids, end_of_text] for e in tokenizer.encode_batch(held)]

    model = DemoMtpModel(text_config(SHAPE, eos_token_id=im_end, pad_token_id=end_of_text))
    _log(f"training {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters")
    result = train(model, train_docs, settings, _log_step)
    _round_to_bf16(model)
    losses = evaluate.held_out_losses(model, held_docs, settings.seq_len)
    stride = max(1, len(corpus.held_out) // args.eval_prompts)
    prompts = [
        tokenizer.encode(chat_text([("user", pair.request)], add_generation_prompt=True)).ids
        for pair in corpus.held_out[::stride][: args.eval_prompts]
    ]
    acceptance = evaluate.acceptance_by_depth(model, prompts, 3, 64, im_end)
    _log(f"held-out trunk loss {losses.trunk_loss:.3f}, acceptance {acceptance.rates}")

    vision = vision_config(VISION, out_hidden_size=SHAPE.hidden_size)
    visual = random_vision_tower(vision, args.seed)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    llama_tree = export_gguf.llama_cpp_source(args.llama_cpp_cache)
    held_stream = [token for document in held_docs for token in document][:COMPARE_POSITIONS]
    with tempfile.TemporaryDirectory() as scratch:
        hf_dir = args.keep_hf or Path(scratch) / "hf"
        write_vision_checkpoint(model, visual, vision, tokenizer, hf_dir)
        reload_diff = reload_difference(model, hf_dir, held_stream)
        _log(f"transformers reloads the release: max |text logit diff| {reload_diff}")
        export_gguf.convert_to_gguf(
            hf_dir, out / GGUF_NAME, llama_tree, "q8_0", model_name=MODEL_NAME
        )
        export_gguf.convert_to_gguf(
            hf_dir, out / PROJECTOR_NAME, llama_tree, "f16", model_name=MODEL_NAME, mmproj=True
        )
    agreement = verify_gguf.compare_with_torch(out / GGUF_NAME, model, tokenizer, held_stream)
    if agreement.tokenizer_mismatches:
        raise SystemExit(f"llama.cpp tokenizes differently: {agreement.tokenizer_mismatches}")
    image_check = check_image_evaluation(out / GGUF_NAME, out / PROJECTOR_NAME)
    _log(f"llama.cpp + mtmd: {image_check}")

    report = {
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "environment": {
            "python": corpus.python_version,
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "torch_threads": args.threads,
            "llama_cpp_python_converter": export_gguf.LLAMA_CPP_PYTHON_VERSION,
        },
        "corpus_sha256": corpus.sha256,
        "model": {**asdict(SHAPE), "parameters": sum(p.numel() for p in model.parameters())},
        "vision_tower": {**asdict(VISION), "trained": False, "seed": args.seed},
        "training": {
            **asdict(settings),
            "wall_time_s": round(result.wall_time_s, 1),
            "final_trunk_loss": result.logs[-1].trunk_loss,
            "final_mtp_loss": result.logs[-1].mtp_loss,
        },
        "held_out": asdict(losses),
        "acceptance_text_only": {**asdict(acceptance), "rates": acceptance.rates},
        "hf_reload_max_abs_logit_diff": reload_diff,
        "gguf_check": asdict(agreement),
        "image_check": asdict(image_check),
        "files": [_file_entry(out / GGUF_NAME), _file_entry(out / PROJECTOR_NAME)],
        "total_wall_time_s": round(time.monotonic() - started, 1),
    }
    report_path = staging_path(out / REPORT_NAME)
    report_path.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    publish(report_path, out / REPORT_NAME)
    _log(f"done in {report['total_wall_time_s']:.0f}s; artifacts in {out}")


if __name__ == "__main__":
    main()
