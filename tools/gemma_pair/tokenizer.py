"""A small Gemma-4-style tokenizer for the test pair, built so llama.cpp and transformers agree.

Gemma 4's tokenizer is a SentencePiece-style BPE: spaces become ``▁`` (a normaliser, no prefix
space), the merges run over the text without word splitting, unknown characters fall back to
``<0xNN>`` byte tokens, and the decoder turns ``▁`` back into spaces and fuses the bytes. llama.cpp
re-implements it as the ``gemma4`` tokenizer model (BPE, pre-tokenizer ``gemma4``), which splits
the text into newline runs and the rest before merging — so the merges here are trained with that
same split (no merge ever joins a newline to another character) and every runtime gives the same
ids: `tokenizers` with tokenizer.json (training, transformers, mlx-lm) and llama.cpp with the GGUF
(llama.cpp's converter reads the vocabulary through ``LlamaHfVocab``, which needs byte fallback
and a ``Sequence`` decoder, both present).

The special tokens are Gemma's (``<pad>`` 0, ``<eos>`` 1, ``<bos>`` 2, ``<unk>`` 3, ``<mask>`` 4)
plus Gemma 4's turn markers ``<|turn>`` / ``<turn|>``; the chat format is Gemma 4's
(``<bos><|turn>user\\n…<turn|>\\n<|turn>model\\n``) without the thinking channel.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

PAD, EOS, BOS, UNK, MASK = "<pad>", "<eos>", "<bos>", "<unk>", "<mask>"
TURN_START, TURN_END = "<|turn>", "<turn|>"
SPECIAL_TOKENS = (PAD, EOS, BOS, UNK, MASK, TURN_START, TURN_END)
BYTE_TOKENS = tuple(f"<0x{value:02X}>" for value in range(256))
NEWLINE_SPLIT = r"\n+"  # llama.cpp's gemma4 pre-tokenizer: "[^\n]+|[\n]+"

CHAT_TEMPLATE = (
    "{{- bos_token -}}"
    "{%- for message in messages -%}"
    "{%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}"
    "{{- '<|turn>' + role + '\\n' + message['content'] | trim + '<turn|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|turn>model\\n' -}}{%- endif -%}"
)


def chat_text(messages: Iterable[tuple[str, str]], add_generation_prompt: bool = False) -> str:
    """What CHAT_TEMPLATE renders for (role, content) messages, ``<bos>`` included."""
    turns = "".join(
        f"{TURN_START}{'model' if role == 'assistant' else role}\n{content.strip()}{TURN_END}\n"
        for role, content in messages
    )
    return BOS + turns + (f"{TURN_START}model\n" if add_generation_prompt else "")


def _pipeline(tokenizer: Tokenizer) -> Tokenizer:
    tokenizer.normalizer = normalizers.Replace(" ", "▁")
    tokenizer.pre_tokenizer = pre_tokenizers.Split(Regex(NEWLINE_SPLIT), behavior="isolated")
    tokenizer.decoder = decoders.Sequence(
        [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()]
    )
    return tokenizer


def train_tokenizer(texts: Iterable[str], vocab_size: int) -> Tokenizer:
    """A BPE of exactly ``vocab_size`` ids: the specials, the 256 byte tokens, then merges
    trained on ``texts`` (characters seen fewer than 50 times are left to the byte tokens)."""
    scratch = _pipeline(Tokenizer(models.BPE()))
    scratch.add_special_tokens(list(SPECIAL_TOKENS))  # kept out of the merges: never "<|turn>user"
    reserved = len(SPECIAL_TOKENS) + len(BYTE_TOKENS)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - reserved + len(SPECIAL_TOKENS),
        min_frequency=2,
        special_tokens=list(SPECIAL_TOKENS),
        limit_alphabet=200,
        show_progress=False,
    )
    scratch.train_from_iterator(texts, trainer=trainer)
    trained = json.loads(scratch.to_str())["model"]
    learned = [
        token
        for token, _ in sorted(trained["vocab"].items(), key=lambda item: item[1])
        if token not in SPECIAL_TOKENS
    ]
    vocab = {token: index for index, token in enumerate((*SPECIAL_TOKENS, *BYTE_TOKENS, *learned))}
    if len(vocab) != vocab_size:
        raise ValueError(
            f"the corpus gave {len(vocab)} tokens, not {vocab_size}; use a larger corpus"
        )
    merges = [tuple(merge.split(" ", 1)) if isinstance(merge, str) else tuple(merge)
              for merge in trained["merges"]]  # fmt: skip
    tokenizer = _pipeline(
        Tokenizer(
            models.BPE(vocab=vocab, merges=merges, unk_token=UNK, fuse_unk=True, byte_fallback=True)
        )
    )
    tokenizer.add_special_tokens(list(SPECIAL_TOKENS))
    return tokenizer


def token_id(tokenizer: Tokenizer, token: str) -> int:
    found = tokenizer.token_to_id(token)
    if found is None:
        raise ValueError(f"the tokenizer has no {token} token")
    return found


def write_tokenizer_files(tokenizer: Tokenizer, directory: Path, max_length: int) -> None:
    """tokenizer.json and tokenizer_config.json (with the chat template), as Gemma ships them;
    ``TokenizersBackend`` makes transformers use tokenizer.json's pipeline as it is."""
    tokenizer.save(str(directory / "tokenizer.json"))
    config = {
        "tokenizer_class": "TokenizersBackend",
        "model_max_length": max_length,
        "bos_token": BOS,
        "eos_token": TURN_END,
        "pad_token": PAD,
        "unk_token": UNK,
        "mask_token": MASK,
        "add_bos_token": False,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "split_special_tokens": False,
        "chat_template": CHAT_TEMPLATE,
        "added_tokens_decoder": {
            str(token_id(tokenizer, token)): {
                "content": token,
                "lstrip": False,
                "normalized": False,
                "rstrip": False,
                "single_word": False,
                "special": True,
            }
            for token in SPECIAL_TOKENS
        },
    }
    (directory / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
