"""The demo model's byte-level BPE tokenizer and chat format, built so every runtime agrees on it.

Three programs tokenize this model's text, and they must give the same ids:
- transformers (and mlx-lm, which loads tokenizers through it): for model type `qwen3_5` it
  ignores tokenizer.json's pipeline and rebuilds Qwen3.5's own — NFC normaliser, Qwen3.5's split
  regex, byte-level — around the file's vocabulary and merges;
- `tokenizers` with tokenizer.json, which trained the model;
- llama.cpp, which re-implements a named pre-tokenizer (`qwen35`: the same regex) and applies the
  merges, with no normaliser.
So the BPE is trained with exactly transformers' Qwen3.5 pipeline, and the GGUF names `qwen35`.
All three then agree token for token on NFC text (all ordinary text; the corpus is NFC); on
decomposed Unicode llama.cpp differs as it does for every Qwen3.5 GGUF. The chat format is Qwen's
ChatML (<|im_start|>role … <|im_end|>).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

# Qwen3.5's split regex (transformers' Qwen3_5Tokenizer); llama.cpp's `qwen35` pre-tokenizer
# implements the same one.
QWEN35_SPLIT_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
    r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
LLAMA_CPP_PRE_TOKENIZER = "qwen35"

END_OF_TEXT = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
SPECIAL_TOKENS = (END_OF_TEXT, IM_START, IM_END)

CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def chat_text(messages: Iterable[tuple[str, str]], add_generation_prompt: bool = False) -> str:
    """The text CHAT_TEMPLATE renders for (role, content) messages — the format the model learns."""
    text = "".join(f"{IM_START}{role}\n{content}{IM_END}\n" for role, content in messages)
    return text + (f"{IM_START}assistant\n" if add_generation_prompt else "")


def new_tokenizer() -> Tokenizer:
    """An empty byte-level BPE with Qwen3.5's normaliser (NFC) and pre-tokenizer."""
    tokenizer = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN35_SPLIT_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    return tokenizer


def train_tokenizer(texts: Iterable[str], vocab_size: int) -> Tokenizer:
    """Train the BPE on ``texts``; the special tokens take ids 0..2, then the 256 byte symbols."""
    tokenizer = new_tokenizer()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    return tokenizer


def special_token_id(tokenizer: Tokenizer, token: str) -> int:
    token_id = tokenizer.token_to_id(token)
    if token_id is None:
        raise ValueError(f"the tokenizer has no {token} token")
    return token_id


def write_tokenizer_files(
    tokenizer: Tokenizer,
    directory: Path,
    max_length: int,
    *,
    special_tokens: tuple[str, ...] = SPECIAL_TOKENS,
    chat_template: str = CHAT_TEMPLATE,
) -> None:
    """tokenizer.json, tokenizer_config.json (with the chat template) as Qwen releases have them."""
    tokenizer.save(str(directory / "tokenizer.json"))
    config = {
        "tokenizer_class": "TokenizersBackend",
        "model_max_length": max_length,
        "bos_token": None,
        "eos_token": IM_END,
        "pad_token": END_OF_TEXT,
        "unk_token": None,
        "add_bos_token": False,
        "add_prefix_space": False,
        "clean_up_tokenization_spaces": False,
        "split_special_tokens": False,
        "errors": "replace",
        "chat_template": chat_template,
        "added_tokens_decoder": {
            str(special_token_id(tokenizer, token)): {
                "content": token,
                "lstrip": False,
                "normalized": False,
                "rstrip": False,
                "single_word": False,
                "special": True,
            }
            for token in special_tokens
        },
    }
    (directory / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
