"""Model repos shaped like real Hub ones, for search, one-quantisation downloads and ``get``.

Why: what search must understand is the shape of real conversions — a GGUF repo with several
quantisations, a large one split into ``-00001-of-00003.gguf`` parts in a folder, vision
projectors ``mmproj-*.gguf`` in three precisions; a repo whose GGUFs carry the MTP head inside
(``…-mtp.gguf``); a trunk with its head as a separate ``mtp-*.gguf``; an MLX conversion; a base
model. Their cards name ``base_model`` so the hub tags them ``base_model:quantized:ORG/NAME`` as
the Hub does. Most file contents are filler of distinct sizes (search reads names and sizes
only); the separate-head repo is real — the demo model converted as llama.cpp does with
``--no-mtp`` (the trunk) and ``--mtp`` (``mtp-*.gguf``, the head alone) — so ``get`` can graft it
and llama.cpp run the result.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import tempfile
from pathlib import Path

from tests.graft.bases import DEMO_GGUF, write_head_only, write_trunk_only
from tests.localhub.server import LocalHub

BASE = "acme/Tiny-MTP-8B"
GGUF_REPO = "quantfolk/Tiny-MTP-8B-GGUF"
HEAD_INSIDE_REPO = "mtpfolk/Tiny-MTP-8B-MTP-GGUF"
SEPARATE_HEAD_REPO = "splitfolk/Tiny-MTP-8B-GGUF"
MLX_REPO = "mlx-community/Tiny-MTP-8B-4bit"
OTHER_REPO = "quantfolk/Other-Model-3B-GGUF"

KB = 1000
SIZES = {
    "Tiny-MTP-8B-Q4_K_M.gguf": 300 * KB,
    "Tiny-MTP-8B-Q8_0.gguf": 500 * KB,
    "BF16/Tiny-MTP-8B-BF16-00001-of-00003.gguf": 400 * KB,
    "BF16/Tiny-MTP-8B-BF16-00002-of-00003.gguf": 400 * KB,
    "BF16/Tiny-MTP-8B-BF16-00003-of-00003.gguf": 200 * KB,
    "mmproj-Tiny-MTP-8B-f16.gguf": 60 * KB,
    "mmproj-Tiny-MTP-8B-bf16.gguf": 60 * KB,
    "mmproj-Tiny-MTP-8B-Q8_0.gguf": 32 * KB,
}
PROJECTOR = "mmproj-Tiny-MTP-8B-f16.gguf"
"""The projector a download of any quantisation fetches: the smallest lossless (F16 over BF16)."""
SPLIT_BF16_BYTES = 1000 * KB
BASE_CONFIG = (
    b'{"architectures": ["Qwen3_5ForCausalLM"], "num_hidden_layers": 8, "hidden_size": 256,'
    b' "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 1024,'
    b' "max_position_embeddings": 8192, "mtp_num_hidden_layers": 1}'
)


def card(base: str | None, library: str | None = None, tags: tuple[str, ...] = ()) -> bytes:
    lines = ["---"]
    if library:
        lines.append(f"library_name: {library}")
    if base:
        lines.append(f"base_model: {base}")
    if tags:
        lines.append(f"tags: [{', '.join(tags)}]")
    lines += ["---", "", "A model card."]
    return "\n".join(lines).encode()


def filler(size: int) -> bytes:
    return os.urandom(size)


SEPARATE_TRUNK = "Tiny-MTP-8B-Q8_0.gguf"
SEPARATE_HEAD_FILE = "mtp-Tiny-MTP-8B-Q8_0.gguf"


@functools.cache
def separate_head_files() -> dict[str, Path]:
    """The demo model as a ``--no-mtp`` trunk and a ``--mtp`` head file, written once per test
    session (removed when it ends)."""
    folder = Path(tempfile.mkdtemp(prefix="shaped-repos-"))
    atexit.register(shutil.rmtree, folder, True)
    return {
        SEPARATE_TRUNK: write_trunk_only(DEMO_GGUF, folder / SEPARATE_TRUNK),
        SEPARATE_HEAD_FILE: write_head_only(DEMO_GGUF, folder / SEPARATE_HEAD_FILE),
    }


def seed_shaped_repos(hub: LocalHub) -> None:
    """Seed every repo above, with download counts that order them."""
    hub.seed_files(
        BASE,
        {
            "README.md": card(None, "transformers"),
            "config.json": BASE_CONFIG,
            "model.safetensors": filler(900 * KB),
        },
    )
    hub.seed_files(
        GGUF_REPO,
        {"README.md": card(BASE), **{path: filler(size) for path, size in SIZES.items()}},
    )
    hub.seed_files(
        HEAD_INSIDE_REPO,
        {
            "README.md": card(BASE, tags=("mtp",)),
            "Tiny-MTP-8B-Q4_K_M-mtp.gguf": filler(320 * KB),
        },
    )
    hub.seed_files(
        SEPARATE_HEAD_REPO,
        {"README.md": card(BASE), **separate_head_files()},
    )
    hub.seed_files(
        MLX_REPO,
        {
            "README.md": card(BASE, "mlx"),
            "config.json": BASE_CONFIG,
            "model.safetensors": filler(250 * KB),
        },
    )
    hub.seed_files(OTHER_REPO, {"README.md": card("acme/Other-Model-3B"), "m-Q4_0.gguf": b"GGUF"})
    for rank, repo in enumerate(
        (OTHER_REPO, SEPARATE_HEAD_REPO, HEAD_INSIDE_REPO, MLX_REPO, GGUF_REPO, BASE), 1
    ):
        hub.set_stats(repo, downloads=rank * 100)
