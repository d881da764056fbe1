"""Make the tiny Gemma 4 target + assistant (MTP drafter) pairs that ship in resources/models.

Google's Gemma 4 drafters are separate models (`gemma4_assistant`, GGUF `gemma4-assistant`) that
read their target's last hidden state and KV cache. Nothing can be downloaded here, so the project
makes its own tiny pairs — one of each kind Google ships (tools/gemma_pair/shapes.py: the
centroid-masked head of E2B/E4B, the dense tied head of 26B/31B) — with transformers, trains them
briefly on the demo model's corpus so drafts are accepted for a reason, and converts each model
with llama.cpp's own converter from the pinned llama-cpp-python source, so llama.cpp loads them as
it loads Google's files. One run, deterministic for a seed, thread count and Python version:

  corpus → Gemma-style BPE → per kind: train target → distil assistant → BF16 HF checkpoints →
  acceptance, reference drafts (transformers) → Q8_0 GGUFs → checked in llama.cpp → report

Usage (needs the `train` extra: pip install -e .[train], transformers 5.23):

  .venv/bin/python tools/make_gemma_pair.py        # both pairs: about an hour on 2 busy cores
  .venv/bin/python tools/make_gemma_pair.py --target-steps 20 --assistant-steps 20 --out /tmp/p
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import transformers
from demo_model import export_gguf
from demo_model.corpus import build_corpus
from demo_model.files import publish, staging_path
from gemma_pair import layout
from gemma_pair.hf_compat import patch_kv_sharing
from gemma_pair.reference import acceptance, public_path_difference, reference_drafts
from gemma_pair.shapes import KINDS, PairShape, assistant_config, target_config
from gemma_pair.tokenizer import (
    BOS,
    EOS,
    PAD,
    TURN_END,
    chat_text,
    token_id,
    train_tokenizer,
    write_tokenizer_files,
)
from gemma_pair.train import Batches, Schedule, StepLog, distil_assistant, train_target
from gemma_pair.verify_llama import LoadedPair, compare_with_transformers
from tokenizers import Tokenizer
from transformers import Gemma4AssistantForCausalLM, Gemma4ForCausalLM

REPO = Path(__file__).resolve().parents[1]
DEPTH = 3
SEQ_LEN = 256
LONG_PROMPT_TOKENS = 100  # longer than the sliding window (64), for the reference drafts


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "resources" / "models")
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS))
    parser.add_argument("--target-steps", type=int, default=400)
    parser.add_argument("--assistant-steps", type=int, default=240)
    parser.add_argument("--seed", type=int, default=4242)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--eval-prompts", type=int, default=16)
    parser.add_argument("--eval-new-tokens", type=int, default=64)
    parser.add_argument(
        "--llama-cpp-cache",
        type=Path,
        default=Path.home() / ".cache" / "mtp-studio" / "llama-cpp-src",
        help="where the llama-cpp-python sdist (for its GGUF converter) is fetched and unpacked",
    )
    return parser.parse_args()


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def _log_step(entry: StepLog) -> None:
    _log(f"{entry.stage} step {entry.step}: loss {entry.loss:.3f} ({entry.elapsed_s:.0f}s)")


def _round_to_bf16(model: torch.nn.Module) -> None:
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(parameter.to(torch.bfloat16).float())


def _save(model: torch.nn.Module, tokenizer: Tokenizer, directory: Path, shape: PairShape) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    model.to(torch.bfloat16).save_pretrained(directory)
    model.float()
    write_tokenizer_files(tokenizer, directory, max_length=4096)
    release_style_config(directory / "config.json", shape)


def release_style_config(path: Path, shape: PairShape) -> None:
    """Write the full-attention head size and KV heads as Google's releases do
    (``global_head_dim``, ``num_global_key_value_heads``) instead of transformers 5.23's
    ``per_layer_config``, which mlx-lm does not read; transformers rebuilds the latter."""
    config = json.loads(path.read_text())
    for text in (config, config.get("text_config")):
        if isinstance(text, dict) and "per_layer_config" in text:
            del text["per_layer_config"]
            text["global_head_dim"] = shape.global_head_dim
            if text.get("attention_k_eq_v"):
                text["num_global_key_value_heads"] = 1
    path.write_text(json.dumps(config, indent=2) + "\n")


def _file_entry(path: Path, root: Path) -> dict[str, object]:
    return {
        "path": path.relative_to(root).as_posix(),
        "bytes": path.stat().st_size,
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
    }


@dataclass(frozen=True)
class Inputs:
    """What every pair is made from: the tokenizer, the training documents, the held-out
    prompts acceptance is measured on, and a held-out text longer than the sliding window."""

    tokenizer: Tokenizer
    train_docs: list[list[int]]
    eval_prompts: list[list[int]]
    long_text: list[int]

    def special_ids(self) -> dict[str, int]:
        return {
            "pad": token_id(self.tokenizer, PAD),
            "bos": token_id(self.tokenizer, BOS),
            "eos": token_id(self.tokenizer, EOS),
            "turn_end": token_id(self.tokenizer, TURN_END),
        }


def make_pair(
    kind: str, args: argparse.Namespace, inputs: Inputs, llama_tree: Path
) -> dict[str, object]:
    """Train, save, measure and convert one pair into a staging copy of its folder, then publish
    it; the pair's entry of the report."""
    shape = PairShape(kind)
    final = layout.pair_dir(args.out, kind)
    staging = staging_path(final)
    training = _train(shape, args, inputs, staging)
    _log(f"{kind}: measuring acceptance and writing reference drafts (transformers, float32)")
    target = Gemma4ForCausalLM.from_pretrained(layout.hf_target(staging), dtype=torch.float32)
    assistant = Gemma4AssistantForCausalLM.from_pretrained(
        layout.hf_assistant(staging), dtype=torch.float32
    )
    measured, texts, reference_prompts = _measure(
        target.eval(), assistant.eval(), shape, args, inputs, staging
    )
    _log(f"{kind}: converting both models with llama.cpp's converter ({layout.GGUF_QUANT})")
    target_gguf, assistant_gguf = _convert(kind, staging, llama_tree)
    _log(f"{kind}: checking both GGUFs in llama.cpp against transformers")
    pair = LoadedPair(target_gguf, assistant_gguf)
    try:
        agreement = compare_with_transformers(
            pair, inputs.tokenizer, target, assistant, texts[0], reference_prompts
        )
    finally:
        pair.close()
    if agreement.tokenizer_mismatches:
        raise SystemExit(f"llama.cpp tokenizes differently: {agreement.tokenizer_mismatches}")
    _log(f"{kind}: llama.cpp agreement {agreement}")
    files = sorted(path for path in staging.rglob("*") if path.is_file())
    publish(staging, final)
    return {
        "shape": shape.__dict__,
        "training": training,
        **measured,
        "llama_cpp": agreement.__dict__,
        "files": [_file_entry(final / path.relative_to(staging), args.out) for path in files],
    }


def _train(
    shape: PairShape, args: argparse.Namespace, inputs: Inputs, staging: Path
) -> dict[str, object]:
    """Train the target, distil its assistant, save both (BF16) into ``staging``."""
    special = inputs.special_ids()
    torch.manual_seed(args.seed)
    target = Gemma4ForCausalLM(target_config(shape, special))
    assistant = Gemma4AssistantForCausalLM(assistant_config(shape, special))
    _log(
        f"{shape.kind}: target {sum(p.numel() for p in target.parameters()) / 1e6:.2f}M, "
        f"assistant {sum(p.numel() for p in assistant.parameters()) / 1e6:.2f}M parameters"
    )
    docs = inputs.train_docs
    schedule = Schedule(args.target_steps, 8, SEQ_LEN + 1, 3e-3)
    target_logs = train_target(target, Batches(docs, SEQ_LEN + 1, args.seed), schedule, _log_step)
    distil_schedule = Schedule(args.assistant_steps, 8, SEQ_LEN, 3e-3)
    assistant_logs = distil_assistant(
        target, assistant, Batches(docs, SEQ_LEN, args.seed + 1), distil_schedule,
        DEPTH, args.seed, _log_step,
    )  # fmt: skip
    _save(target, inputs.tokenizer, layout.hf_target(staging), shape)
    _save(assistant, inputs.tokenizer, layout.hf_assistant(staging), shape)
    return {
        "target": [log.__dict__ for log in target_logs],
        "assistant": [log.__dict__ for log in assistant_logs],
    }


def _measure(
    target: Gemma4ForCausalLM,
    assistant: Gemma4AssistantForCausalLM,
    shape: PairShape,
    args: argparse.Namespace,
    inputs: Inputs,
    staging: Path,
) -> tuple[dict[str, object], list[list[int]], list[list[int]]]:
    """Acceptance by depth on the held-out prompts and the reference drafts (written into
    ``staging``): (report entries, the greedy texts, the reference prompts)."""
    stop = inputs.special_ids()["turn_end"]
    prompts = inputs.eval_prompts
    texts = [_continuation(target, prompt, args.eval_new_tokens, stop) for prompt in prompts]
    lengths = [len(prompt) for prompt in prompts]
    as_configured = acceptance(target, assistant, texts, lengths, DEPTH, dense=False)
    dense = acceptance(target, assistant, texts, lengths, DEPTH, dense=True)
    _log(f"{shape.kind}: acceptance by depth {as_configured.rates} (dense head {dense.rates})")
    short_prompts = [prompt for prompt in prompts if len(prompt) < shape.sliding_window][:2]
    reference_prompts = [*short_prompts, inputs.long_text[:LONG_PROMPT_TOKENS]]
    arrays = reference_drafts(target, assistant, reference_prompts, DEPTH)
    np.savez_compressed(layout.reference_file(staging), **arrays)
    measured = {
        "acceptance_by_depth": {
            "drafted_positions": as_configured.drafted,
            "as_configured": as_configured.rates,
            "dense_head": dense.rates,
        },
        "reference_vs_transformers_forward_max_abs_diff": public_path_difference(
            target, assistant, short_prompts[0]
        ),
    }
    return measured, texts, reference_prompts


def _convert(kind: str, staging: Path, llama_tree: Path) -> tuple[Path, Path]:
    """Both checkpoints through llama.cpp's converter; the two GGUF paths."""
    target_gguf = layout.target_gguf(staging, kind)
    assistant_gguf = layout.assistant_gguf(staging, kind)
    assistant_gguf.parent.mkdir(parents=True, exist_ok=True)
    outtype = layout.GGUF_QUANT.lower()
    name = f"MTP Studio tiny Gemma 4 ({kind} kind)"
    export_gguf.convert_to_gguf(layout.hf_target(staging), target_gguf, llama_tree, outtype, name)
    export_gguf.convert_to_gguf(
        layout.hf_assistant(staging), assistant_gguf, llama_tree, outtype, f"{name} assistant"
    )
    return target_gguf, assistant_gguf


def _continuation(target: Gemma4ForCausalLM, prompt: list[int], count: int, stop: int) -> list[int]:
    with torch.no_grad():
        out = target.generate(
            torch.tensor([prompt]), max_new_tokens=count, do_sample=False, eos_token_id=stop
        )
    return out[0].tolist()


def main() -> None:
    args = parse_args()
    started = time.monotonic()
    torch.set_num_threads(args.threads)
    patch_kv_sharing()
    args.out.mkdir(parents=True, exist_ok=True)
    _log("building the corpus from the standard library")
    corpus = build_corpus()
    texts = [chat_text([("user", p.request), ("assistant", p.answer)]) for p in corpus.train]
    tokenizer = train_tokenizer(texts, PairShape(KINDS[0]).vocab_size)
    train_docs = [encoding.ids for encoding in tokenizer.encode_batch(texts)]
    stride = max(1, len(corpus.held_out) // args.eval_prompts)
    eval_prompts = [
        tokenizer.encode(chat_text([("user", pair.request)], add_generation_prompt=True)).ids
        for pair in corpus.held_out[::stride][: args.eval_prompts]
    ]
    long_text = next(
        ids
        for pair in corpus.held_out
        if len(
            ids := tokenizer.encode(
                chat_text([("user", pair.request), ("assistant", pair.answer)])
            ).ids
        )
        > LONG_PROMPT_TOKENS
    )
    _log(f"{len(train_docs)} training pairs, {sum(map(len, train_docs))} tokens")
    llama_tree = export_gguf.llama_cpp_source(args.llama_cpp_cache)
    inputs = Inputs(tokenizer, train_docs, eval_prompts, long_text)
    pairs = {kind: make_pair(kind, args, inputs, llama_tree) for kind in args.kinds}
    report = {
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "environment": {
            "python": corpus.python_version,
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "torch_threads": args.threads,
            "machine": f"{platform.machine()}, {platform.processor() or 'cpu'}",
            "llama_cpp_python_converter": export_gguf.LLAMA_CPP_PYTHON_VERSION,
        },
        "corpus": {"sha256": corpus.sha256, "train_pairs": len(corpus.train)},
        "draft_depth": DEPTH,
        "pairs": pairs,
        "wall_time_s": round(time.monotonic() - started, 1),
    }
    report_path = staging_path(args.out / layout.REPORT_NAME)
    report_path.write_text(json.dumps(report, indent=2) + "\n")
    publish(report_path, args.out / layout.REPORT_NAME)
    _log(f"done in {report['wall_time_s']:.0f}s")


if __name__ == "__main__":
    main()
