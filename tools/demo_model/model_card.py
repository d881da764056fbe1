"""MODEL_CARD.md for the demo model, written from the run's own report so no figure is retyped.

The card must say exactly how the artifacts were made and what was measured. Rendering it from
training_report.json (the numbers the run measured) keeps card and artifacts in step whenever the
model is retrained.
"""

from __future__ import annotations

from typing import Any


def _percent(value: float) -> str:
    return f"{100 * value:.1f}%"


def _files_table(files: list[dict[str, Any]]) -> str:
    rows = [f"| `{f['path']}` | {f['bytes'] / 1e6:.2f} MB | `{f['sha256'][:16]}…` |" for f in files]
    return "\n".join(["| file | size | sha256 |", "|---|---|---|", *rows])


def _measured_table(report: dict[str, Any]) -> str:
    gguf_type = report["environment"]["gguf_outtype"].upper()
    training, held = report["training"], report["held_out"]
    check, acceptance = report["gguf_check"], report["acceptance"]
    rows = [
        (
            "trunk held-out loss (next token)",
            f"{held['trunk_loss']:.3f} nats/token over {held['tokens']} tokens",
        ),
        ("MTP head held-out loss (token after next)", f"{held['mtp_loss']:.3f} nats/token"),
        (
            "head top-1 = trunk top-1, teacher-forced on held-out text",
            _percent(held["head_top1_agreement"]),
        ),
        (
            "greedy acceptance of recursive drafts, depth 1 / 2 / 3",
            " / ".join(_percent(rate) for rate in acceptance["rates"]),
        ),
        (
            "final training loss, trunk / MTP",
            f"{training['final_trunk_loss']:.3f} / {training['final_mtp_loss']:.3f}",
        ),
        ("training wall time", f"{training['wall_time_s'] / 60:.1f} minutes"),
        (
            "llama.cpp vs PyTorch, next-token argmax agreement",
            f"{_percent(check['argmax_agreement'])} over {check['positions']} positions",
        ),
        (
            "llama.cpp vs PyTorch, max abs logit difference",
            f"{check['max_abs_logit_diff']:.4f} ({gguf_type} GGUF vs BF16 weights)",
        ),
        (
            "tokenizer probes where llama.cpp ≠ HF tokenizer",
            f"{len(check['tokenizer_mismatches'])} of {check['tokenizer_probes']}",
        ),
    ]
    return "\n".join(["| figure | value |", "|---|---|", *(f"| {a} | {b} |" for a, b in rows)])


def render_model_card(report: dict[str, Any]) -> str:
    env, corpus, model = report["environment"], report["corpus"], report["model"]
    training, acceptance, sample = report["training"], report["acceptance"], report["sample"]
    layers = model["num_hidden_layers"]
    gguf_type = env["gguf_outtype"].upper()
    converter = f"llama-cpp-python=={env['llama_cpp_python_converter']}"
    counts = f"{list(acceptance['accepted'])}/{list(acceptance['drafted'])}"
    return f"""# MTP Studio demo model (Qwen3.5 architecture + one MTP layer)

A deliberately tiny model that lets MTP Studio chat and run native MTP speculative decoding out of
the box, with nothing downloaded. It writes Python in the style of the standard library; it is a
demonstration, not an assistant to rely on.

Made by `tools/train_demo_model.py` (run: `{report["command"]}`), deterministically from a seed
({training["seed"]}), the torch thread count ({env["torch_threads"]}) and Python
{env["python"]}'s standard library. Every figure below is copied from `training_report.json`,
written by the same run.

## Files

- `demo-mtp.gguf` — llama.cpp GGUF, arch `qwen35`, {gguf_type} (norms F32), with the MTP block as
  `blk.{layers}.*` (`nextn.eh_proj/enorm/hnorm/shared_head_norm` + a full-attention decoder block;
  `qwen35.nextn_predict_layers = 1`, `block_count = {layers + 1}`). The app's default model.
- `demo-mtp-hf/` — Hugging Face checkpoint (`Qwen3_5ForCausalLM`, BF16): trunk under `model.*` and
  `lm_head`, the MTP layer under `mtp.*` (`mtp.fc`, `mtp.pre_fc_norm_embedding`,
  `mtp.pre_fc_norm_hidden`, `mtp.norm`, `mtp.layers.0.*`). `config.json` has model type `qwen3_5`
  with the text settings, `mtp_num_hidden_layers: 1` included, under `text_config` — the shape
  transformers (`AutoModelForCausalLM` → `Qwen3_5ForCausalLM`), stock mlx-lm (`qwen3_5`) and
  llama.cpp's converter all load.
  RMSNorm weights are stored as offsets from 1 (the model computes x·(1+w)), as real Qwen3.5
  releases do; only the gated-delta-net's own `linear_attn.norm` is absolute.
- `demo-mtp-fp8/` — the same weights as an FP8 "original release": linear weights in F8_E4M3 with
  one F32 `weight_scale_inv` per 128×128 tile (s = amax/448, q = x/s, dequantise q·s), embeddings,
  lm_head, norms and small tensors in BF16; 3 shards with `model.safetensors.index.json`.
- `tokenizer_probes.json` — probe strings and the ids the Hugging Face tokenizer gives them (the
  tests check llama.cpp against them).
- `training_report.json` — every measured figure, the settings and the files' SHA-256.

{_files_table(report["files"])}

## How it was made

1. **Corpus**: Python {env["python"]}'s standard library (tests, `lib2to3`, `turtledemo` and
   `site-packages` excluded). Every function becomes a ChatML pair: the user asks with the
   docstring (first paragraphs, ≤ 600 characters) — or, for a function without one, with its
   signature ("Write the Python function `def name(args)`.") — and the assistant answers with the
   function's code in a ```python fence (docstring cut out; code ≤ 1500 characters). One file in 40
   (chosen by a hash of its path) is held out. {corpus["train_pairs"]} training pairs
   ({corpus["train_tokens"]} tokens), {corpus["held_out_pairs"]} held-out pairs
   ({corpus["held_out_tokens"]} tokens); corpus SHA-256 `{corpus["sha256"][:16]}…`.
2. **Tokenizer**: byte-level BPE ({report["tokenizer"]["vocab_size"]} tokens) trained with
   `tokenizers` with exactly the pipeline transformers builds for Qwen3.5 (NFC, Qwen3.5's split
   regex, byte-level), so transformers/mlx-lm, `tokenizers` and llama.cpp's `qwen35`
   pre-tokenizer give the same ids on NFC text (llama.cpp does not normalise: decomposed Unicode
   differs there, as for every Qwen3.5 GGUF); specials `<|endoftext|>` (0), `<|im_start|>` (1),
   `<|im_end|>` (2, end of turn). Chat template: ChatML (Qwen style).
3. **Model**: transformers' `Qwen3_5ForCausalLM` — hidden {model["hidden_size"]}, {layers} layers
   (full attention every {model["full_attention_interval"]}th layer, gated delta net otherwise),
   {model["num_attention_heads"]} attention heads of {model["head_dim"]}
   ({model["num_key_value_heads"]} KV heads, gated output, partial RoPE 0.25, interleaved MRoPE
   sections), linear attention {model["linear_num_heads"]} key/value heads of
   {model["linear_head_dim"]}, MLP {model["intermediate_size"]}, vocabulary {model["vocab_size"]},
   untied lm_head — {model["trunk_parameters"] / 1e6:.2f}M parameters; plus one Qwen-style MTP
   layer ({model["mtp_parameters"] / 1e6:.2f}M): e = pre_fc_norm_embedding(embed(x_t+1)),
   h = pre_fc_norm_hidden(h_t) (the trunk's post-norm state), z = fc([e, h]), one full-attention
   decoder layer, logits = lm_head(norm(z)) with the trunk's lm_head.
4. **Training**: joint loss = trunk next-token cross-entropy + {training["mtp_weight"]} × MTP
   cross-entropy on token t+2 (gradients flow into the trunk). AdamW (β 0.9/0.95, weight decay
   {training["weight_decay"]}), peak lr {training["peak_lr"]}, {training["warmup_steps"]} warm-up
   steps, cosine to {training["final_lr_fraction"]}×; {training["steps"]} steps of
   {training["batch_size"]} × {training["seq_len"]} tokens (packed pairs separated by
   `<|endoftext|>`), bfloat16 autocast on CPU, float32 master weights. {training["tokens_seen"]}
   tokens seen ({training["epochs_seen"]} epochs) in **{training["wall_time_s"] / 60:.1f}
   minutes** with {env["torch_threads"]} torch thread(s) ({env["machine"]}; torch {env["torch"]},
   transformers {env["transformers"]}), sharing the machine with other work. Weights rounded to
   BF16 before evaluation and export.
5. **Exports**: the HF checkpoint from the state dict; the FP8 release by quantising the BF16
   tensors; the GGUF by llama.cpp's own `convert_hf_to_gguf.py` from the {converter} source
   package (`--outtype {env["gguf_outtype"]}`), unmodified except that the pre-tokenizer is
   declared `{report["tokenizer"]["llama_cpp_pre"]}` (the converter recognises vocabularies by a
   hash, and this one is new).

## Measured

{_measured_table(report)}

Acceptance is measured as greedy speculative decoding would see it: the trunk answers
{acceptance["prompts"]} held-out requests greedily ({acceptance["generated_tokens"]} tokens); from
every generated position the head drafts 3 tokens recursively (step k feeds its own post-norm
output and the embedding of draft k−1, attending to the committed rows and its own chain — the
cache a llama.cpp MTP context holds); depth k counts the chains whose first k drafts all equal the
trunk's greedy tokens (accepted/drafted = {counts}).

## Sample (greedy, llama.cpp, {gguf_type} GGUF)

Request: "{sample["request"]}"

````text
{sample["llama_cpp_greedy"]}
````

## Why Q8_0 rather than F16

On a CPU this tiny model is compute-bound (its weights fit in cache), so in F16 verifying K+1
drafted tokens costs almost K+1 plain steps and MTP cannot pay off; llama.cpp's Q8_0 kernels batch
far better. Measured back to back on an earlier build of this model (same architecture, 600
steps; `mtp-studio bench decode --threads 1 --temp 0`, 2 shared cores; not part of the training
run): a 2-token verify cost 2.02× a plain step in F16 vs 1.26× in Q8_0, and MTP at depth 1 ran at
0.73× vs 1.12× the plain-decoding speed, with the same 84% acceptance.

## Limitations

Tiny and briefly trained: it imitates standard-library style rather than solving the request,
often invents names, and greedy decoding can loop. It saw sequences of {training["seq_len"]} tokens
only (the GGUF declares a 4096-token context; quality drops past a few hundred tokens). Its
greedy text is often repetitive, which makes drafts easy to accept; use it to exercise the
runtime, not to judge a real model's speed-up.

## Regenerate

```bash
.venv/bin/pip install -e .[train]          # torch (CPU), transformers>=5, tokenizers
.venv/bin/python tools/train_demo_model.py  # rewrites everything in resources/models/
```

The converter comes from `pip download --no-deps --no-binary :all: {converter}` (done by the
script, cached under `~/.cache/mtp-studio/llama-cpp-src`). The same Python version, seed and
thread count give the same corpus, tokenizer and data order; float results can differ across CPUs.
"""
