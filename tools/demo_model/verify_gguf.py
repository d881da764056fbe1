"""Checks that the GGUF llama.cpp loads is the model that was trained, before it is shipped.

A converter bug (a norm without its +1, a mis-ordered head, a tokenizer split differently) would
not crash llama.cpp: it would quietly produce a worse model. So the GGUF is compared with the
PyTorch model it came from, through the bundled llama.cpp: the tokenizer on probe strings, and the
trunk's next-token argmax and logits along a held-out answer. The tokenizer probes and the ids the
Hugging Face tokenizer gives them are also saved, so the test suite (which has no `tokenizers`)
can re-check the shipped GGUF against them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from llama_cpp import Llama
from tokenizers import Tokenizer

from demo_model.model import DemoMtpModel

TOKENIZER_PROBES = (
    "def add(a, b):\n    return a + b\n",
    "<|im_start|>user\nReturn the sum of a list.<|im_end|>\n<|im_start|>assistant\n",
    "    if not isinstance(value, int):\n        raise TypeError(f'{value!r} is not an int')\n",
    "Ünïcödé: naïve café, 東京, emoji 🦙 and tabs\tand\r\nCRLF",
    "x = [i**2 for i in range(10)]  # squares\n\n\n",
    "I've been 'told he's there, 'RE you sure? 3.14159 1234567",
    "नमस्ते दुनिया — สวัสดีครับ (combining marks: Qwen3.5's split differs from Qwen2's here)",
)


@dataclass(frozen=True)
class GgufAgreement:
    tokenizer_probes: int
    tokenizer_mismatches: tuple[str, ...]
    positions: int
    argmax_agreement: float  # llama.cpp next-token argmax == PyTorch's, over ``positions``
    max_abs_logit_diff: float


def tokenizer_golden(tokenizer: Tokenizer) -> list[dict[str, object]]:
    """The probes with the ids the Hugging Face tokenizer gives them."""
    return [{"text": text, "ids": tokenizer.encode(text).ids} for text in TOKENIZER_PROBES]


def llama_tokens(llama: Llama, text: str) -> list[int]:
    return llama.tokenize(text.encode(), add_bos=False, special=True)


@torch.no_grad()
def compare_with_torch(
    gguf_path: Path, model: DemoMtpModel, tokenizer: Tokenizer, sequence: Sequence[int]
) -> GgufAgreement:
    """Tokenizer and trunk-logit agreement between the GGUF in llama.cpp and the PyTorch model."""
    llama = Llama(str(gguf_path), n_ctx=2048, logits_all=True, verbose=False, seed=0)
    mismatches = tuple(
        text for text in TOKENIZER_PROBES if llama_tokens(llama, text) != tokenizer.encode(text).ids
    )
    llama.eval(list(sequence))
    gguf_logits = np.asarray(llama.scores[: len(sequence)], dtype=np.float64)
    torch_logits = (
        model.logits(model.trunk_states(torch.tensor([list(sequence)])))[0].double().numpy()
    )
    return GgufAgreement(
        tokenizer_probes=len(TOKENIZER_PROBES),
        tokenizer_mismatches=mismatches,
        positions=len(sequence),
        argmax_agreement=float((gguf_logits.argmax(-1) == torch_logits.argmax(-1)).mean()),
        max_abs_logit_diff=float(np.abs(gguf_logits - torch_logits).max()),
    )


def llama_greedy(
    gguf_path: Path, prompt: Sequence[int], max_new_tokens: int, stop: int
) -> list[int]:
    """llama.cpp's own greedy continuation (top-k 1), for the card's sample."""
    llama = Llama(str(gguf_path), n_ctx=2048, verbose=False, seed=0)
    generated: list[int] = []
    for token in llama.generate(list(prompt), top_k=1, temp=0.0, reset=True):
        if token == stop or len(generated) >= max_new_tokens:
            break
        generated.append(token)
    return generated
