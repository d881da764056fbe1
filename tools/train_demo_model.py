"""Train the demo MTP model that ships with MTP Studio and write every artifact of it.

The app must chat out of the box and nothing can be downloaded from the Hub, so the project makes
its own small model of the Qwen3.5 architecture (gated-delta-net + full-attention layers) with one
Qwen-style MTP layer, trained jointly on docstring → code pairs from Python's standard library.
One run, deterministic for a given seed, thread count and Python version:

  corpus → BPE tokenizer → joint training → held-out figures →
  HF checkpoint (BF16, mtp.*) → FP8 block-quantised sharded release → GGUF (qwen35 + nextn)
  → GGUF checked against PyTorch in llama.cpp → training_report.json + MODEL_CARD.md

Usage (needs the `train` extra: pip install -e .[train]):

  .venv/bin/python tools/train_demo_model.py                # full run (~20-35 minutes, 1 thread)
  .venv/bin/python tools/train_demo_model.py --steps 40     # a quick smoke run
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import sys
import time
from dataclasses import asdict
from pathlib import Path

import torch
import transformers
from demo_model import evaluate, export_fp8, export_gguf, export_hf, verify_gguf
from demo_model.corpus import build_corpus
from demo_model.files import publish, staging_path
from demo_model.model import DemoMtpModel, ModelShape, text_config
from demo_model.model_card import render_model_card
from demo_model.tokenizer import (
    END_OF_TEXT,
    IM_END,
    LLAMA_CPP_PRE_TOKENIZER,
    chat_text,
    special_token_id,
    train_tokenizer,
)
from demo_model.train import TrainLog, TrainSettings, train

REPO = Path(__file__).resolve().parents[1]
GGUF_NAME = "demo-mtp.gguf"
HF_DIR_NAME = "demo-mtp-hf"
FP8_DIR_NAME = "demo-mtp-fp8"
REPORT_NAME = "training_report.json"
PROBES_NAME = "tokenizer_probes.json"
CARD_NAME = "MODEL_CARD.md"
SAMPLE_REQUEST = "Return the number of lines in a text file."
COMPARE_POSITIONS = 1024


def parse_args() -> argparse.Namespace:
    defaults = TrainSettings()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "resources" / "models")
    parser.add_argument("--steps", type=int, default=defaults.steps)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads; results depend on it. 1 by default: on 2 shared cores a second "
        "thread spins at every barrier while the other is descheduled (measured 2.4x slower)",
    )
    parser.add_argument("--eval-prompts", type=int, default=24)
    parser.add_argument("--eval-new-tokens", type=int, default=96)
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
    _log(
        f"step {entry.step}: trunk {entry.trunk_loss:.3f} mtp {entry.mtp_loss:.3f} "
        f"lr {entry.lr:.2e} {entry.tokens_per_s:.0f} tok/s {entry.elapsed_s:.0f}s"
    )


def _file_entry(path: Path, root: Path) -> dict[str, object]:
    return {
        "path": path.relative_to(root).as_posix(),
        "bytes": path.stat().st_size,
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
    }


def _round_to_bf16(model: DemoMtpModel) -> None:
    """Round every weight to BF16 (kept in float32), so figures describe the shipped weights."""
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(parameter.to(torch.bfloat16).float())


def main() -> None:
    args = parse_args()
    started = time.monotonic()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    settings = TrainSettings(steps=args.steps, seed=args.seed)
    shape = ModelShape()

    _log("building the corpus from the standard library")
    corpus = build_corpus()
    train_texts = [chat_text([("user", p.request), ("assistant", p.answer)]) for p in corpus.train]
    held_texts = [
        chat_text([("user", p.request), ("assistant", p.answer)]) for p in corpus.held_out
    ]
    tokenizer = train_tokenizer(train_texts, shape.vocab_size)
    end_of_text = special_token_id(tokenizer, END_OF_TEXT)
    im_end = special_token_id(tokenizer, IM_END)
    train_docs = [[*e.ids, end_of_text] for e in tokenizer.encode_batch(train_texts)]
    held_docs = [[*e.ids, end_of_text] for e in tokenizer.encode_batch(held_texts)]
    _log(f"{len(train_docs)} training pairs, {sum(map(len, train_docs))} tokens")

    model = DemoMtpModel(text_config(shape, eos_token_id=im_end, pad_token_id=end_of_text))
    trunk_params = sum(p.numel() for p in model.trunk.parameters())
    mtp_params = sum(p.numel() for p in model.mtp.parameters())
    _log(f"model: trunk {trunk_params / 1e6:.2f}M + MTP {mtp_params / 1e6:.2f}M parameters")
    result = train(model, train_docs, settings, _log_step)
    _round_to_bf16(model)

    _log("evaluating on held-out pairs")
    losses = evaluate.held_out_losses(model, held_docs, settings.seq_len)
    stride = max(1, len(corpus.held_out) // args.eval_prompts)
    eval_prompts = [
        tokenizer.encode(chat_text([("user", pair.request)], add_generation_prompt=True)).ids
        for pair in corpus.held_out[::stride][: args.eval_prompts]
    ]
    acceptance = evaluate.acceptance_by_depth(
        model, eval_prompts, depth=3, max_new_tokens=args.eval_new_tokens, stop_token=im_end
    )
    _log(f"held-out trunk loss {losses.trunk_loss:.3f}, acceptance by depth {acceptance.rates}")

    _log("exporting the HF checkpoint, the FP8 release and the GGUF")
    export_hf.write_hf_checkpoint(model, tokenizer, out / HF_DIR_NAME)
    held_stream = [token for document in held_docs for token in document]
    reload_diff = export_hf.reload_difference(
        model, out / HF_DIR_NAME, held_stream[:COMPARE_POSITIONS]
    )
    _log(f"HF checkpoint reloaded by transformers: max |logit diff| {reload_diff}")
    hf_tokenizer_mismatches = export_hf.tokenizer_reload_mismatches(
        out / HF_DIR_NAME, tokenizer, verify_gguf.TOKENIZER_PROBES
    )
    if hf_tokenizer_mismatches:
        raise SystemExit(f"transformers tokenizes differently: {hf_tokenizer_mismatches}")
    export_fp8.write_fp8_release(model, tokenizer, out / FP8_DIR_NAME)
    llama_tree = export_gguf.llama_cpp_source(args.llama_cpp_cache)
    export_gguf.convert_to_gguf(
        out / HF_DIR_NAME, out / GGUF_NAME, llama_tree, outtype=export_gguf.GGUF_OUTTYPE
    )

    _log("checking the GGUF against the PyTorch model in llama.cpp")
    sample_prompt = tokenizer.encode(
        chat_text([("user", SAMPLE_REQUEST)], add_generation_prompt=True)
    ).ids
    torch_sample = evaluate.greedy_continuation(model, sample_prompt, 160, im_end)
    agreement = verify_gguf.compare_with_torch(
        out / GGUF_NAME, model, tokenizer, held_stream[:COMPARE_POSITIONS]
    )
    llama_sample = verify_gguf.llama_greedy(out / GGUF_NAME, sample_prompt, 160, im_end)
    if agreement.tokenizer_mismatches:
        raise SystemExit(f"llama.cpp tokenizes differently: {agreement.tokenizer_mismatches}")

    probes_path = staging_path(out / PROBES_NAME)
    probes_path.write_text(json.dumps(verify_gguf.tokenizer_golden(tokenizer), indent=2) + "\n")
    publish(probes_path, out / PROBES_NAME)

    artifacts = [out / GGUF_NAME, *sorted((out / HF_DIR_NAME).iterdir())]
    artifacts += sorted((out / FP8_DIR_NAME).iterdir())
    report = {
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "environment": {
            "python": corpus.python_version,
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "torch_threads": args.threads,
            "machine": f"{platform.machine()}, {platform.processor() or 'cpu'}",
            "llama_cpp_python_converter": export_gguf.LLAMA_CPP_PYTHON_VERSION,
            "gguf_outtype": export_gguf.GGUF_OUTTYPE,
        },
        "corpus": {
            "sha256": corpus.sha256,
            "train_pairs": len(corpus.train),
            "held_out_pairs": len(corpus.held_out),
            "train_tokens": sum(map(len, train_docs)),
            "held_out_tokens": sum(map(len, held_docs)),
        },
        "tokenizer": {
            "vocab_size": tokenizer.get_vocab_size(),
            "llama_cpp_pre": LLAMA_CPP_PRE_TOKENIZER,
        },
        "model": {**asdict(shape), "trunk_parameters": trunk_params, "mtp_parameters": mtp_params},
        "training": {
            **asdict(settings),
            "wall_time_s": round(result.wall_time_s, 1),
            "tokens_seen": result.tokens_seen,
            "epochs_seen": round(result.epochs_seen, 3),
            "final_trunk_loss": result.logs[-1].trunk_loss,
            "final_mtp_loss": result.logs[-1].mtp_loss,
            "loss_curve": [
                [entry.step, round(entry.trunk_loss, 4), round(entry.mtp_loss, 4)]
                for entry in result.logs
            ],
        },
        "held_out": asdict(losses),
        "acceptance": {**asdict(acceptance), "rates": acceptance.rates},
        "hf_reload_max_abs_logit_diff": reload_diff,
        "gguf_check": asdict(agreement),
        "sample": {
            "request": SAMPLE_REQUEST,
            "torch_greedy": tokenizer.decode(torch_sample, skip_special_tokens=False),
            "llama_cpp_greedy": tokenizer.decode(llama_sample, skip_special_tokens=False),
        },
        "files": [_file_entry(path, out) for path in artifacts],
        "total_wall_time_s": round(time.monotonic() - started, 1),
    }
    report_path = staging_path(out / REPORT_NAME)
    report_path.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    publish(report_path, out / REPORT_NAME)
    card_path = staging_path(out / CARD_NAME)
    card_path.write_text(render_model_card(report))
    publish(card_path, out / CARD_NAME)
    _log(f"done in {report['total_wall_time_s']:.0f}s; artifacts in {out}")


if __name__ == "__main__":
    main()
