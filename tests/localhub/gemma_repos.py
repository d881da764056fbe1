"""Gemma 4 repos shaped like the Hub's, with real files from the shipped tiny pairs.

Gemma 4 drafts with a separate drafter model, which repos ship in every way real ones do:

- ``google/gemma-4-Tiny-it`` (transformers target) and ``google/gemma-4-Tiny-it-assistant`` (its
  drafter, ``model_type: gemma4_assistant``), as Google publishes them;
- ``unsloth/gemma-4-Tiny-it-GGUF``: quantisations, a vision projector, and the drafter beside
  them as ``mtp-gemma-4-Tiny-it.gguf`` (the name of a separate head file: only its architecture
  says it is a drafter);
- ``ggmlfolk/gemma-4-Tiny-it-GGUF``: the trunk with its drafter in an ``MTP/`` folder;
- ``plainfolk/gemma-4-Tiny-it-GGUF``: a trunk alone; its drafter is a community repo of its own,
  ``draftfolk/gemma-4-Tiny-it-assistant-MTP-GGUF``, found by the ``<base>-assistant`` name;
- ``catfolk/Tiny-Gemma-GGUF``: a trunk whose drafter only the catalog names
  (``catfolk/tiny-drafter-GGUF``);
- ``mixfolk/gemma-4-Tiny-it-GGUF``: a trunk beside the drafter of another model size.

GGUF trunks and drafters are the real ones (llama.cpp's converter); other quantisations and the
projector are filler of distinct sizes (search reads names, sizes and first kilobytes only).
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import tempfile
from pathlib import Path

from tests.drafter.pairs import PAIRS, rewrite_gguf
from tests.localhub.server import LocalHub
from tests.localhub.shaped_repos import card

BASE = "google/gemma-4-Tiny-it"
ASSISTANT = "google/gemma-4-Tiny-it-assistant"
UNSLOTH = "unsloth/gemma-4-Tiny-it-GGUF"
MTP_FOLDER = "ggmlfolk/gemma-4-Tiny-it-GGUF"
PLAIN = "plainfolk/gemma-4-Tiny-it-GGUF"
COMMUNITY_DRAFTER = "draftfolk/gemma-4-Tiny-it-assistant-MTP-GGUF"
CATALOG_TRUNK = "catfolk/Tiny-Gemma-GGUF"
CATALOG_DRAFTER = "catfolk/tiny-drafter-GGUF"
MISMATCHED = "mixfolk/gemma-4-Tiny-it-GGUF"

TRUNK_Q8 = "gemma-4-Tiny-it-Q8_0.gguf"
UNSLOTH_DRAFTER = "mtp-gemma-4-Tiny-it.gguf"
FOLDER_DRAFTER = "MTP/gemma-4-Tiny-it-assistant-Q8_0.gguf"
BF16_FILLER = 6_000_000  # bigger than the real Q8_0 trunk, as a BF16 quantisation is
PROJECTOR = "mmproj-gemma-4-Tiny-it-f16.gguf"
PROJECTOR_BYTES = 70_000


@functools.cache
def _wide_drafter() -> Path:
    """The dense drafter rewritten for a target of hidden size 256 (another model size)."""
    folder = Path(tempfile.mkdtemp(prefix="gemma-repos-"))
    atexit.register(shutil.rmtree, folder, True)
    return rewrite_gguf(
        PAIRS["dense"].drafter,
        folder / "wide.gguf",
        {"gemma4-assistant.embedding_length_out": 256},
    )


def _folder_files(folder: Path) -> dict[str, Path]:
    return {path.name: path for path in sorted(folder.iterdir()) if path.is_file()}


def seed_gemma_repos(hub: LocalHub) -> None:
    centroid, dense = PAIRS["centroid"], PAIRS["dense"]
    hub.seed_files(
        BASE, {"README.md": card(None, "transformers"), **_folder_files(centroid.hf_target)}
    )
    hub.seed_files(
        ASSISTANT,
        {"README.md": card(BASE, "transformers"), **_folder_files(centroid.hf_drafter)},
    )
    hub.seed_files(
        UNSLOTH,
        {
            "README.md": card(BASE),
            TRUNK_Q8: centroid.target,
            "BF16/gemma-4-Tiny-it-BF16.gguf": os.urandom(BF16_FILLER),
            UNSLOTH_DRAFTER: centroid.drafter,
            PROJECTOR: os.urandom(PROJECTOR_BYTES),
        },
    )
    hub.seed_files(
        MTP_FOLDER, {"README.md": card(BASE), TRUNK_Q8: dense.target, FOLDER_DRAFTER: dense.drafter}
    )
    hub.seed_files(PLAIN, {"README.md": card(BASE), TRUNK_Q8: dense.target})
    hub.seed_files(
        COMMUNITY_DRAFTER,
        {"README.md": card(BASE), "gemma-4-Tiny-it-assistant-Q8_0.gguf": dense.drafter},
    )
    hub.seed_files(CATALOG_TRUNK, {"README.md": card(None), "Tiny-Gemma-Q8_0.gguf": dense.target})
    hub.seed_files(CATALOG_DRAFTER, {"README.md": card(None), "drafter.gguf": dense.drafter})
    hub.seed_files(
        MISMATCHED,
        {"README.md": card(BASE), TRUNK_Q8: dense.target, UNSLOTH_DRAFTER: _wide_drafter()},
    )
    for rank, repo in enumerate(
        (MISMATCHED, CATALOG_TRUNK, PLAIN, MTP_FOLDER, UNSLOTH, ASSISTANT, COMMUNITY_DRAFTER, BASE),
        1,
    ):
        hub.set_stats(repo, downloads=rank * 100)
