"""The vision demo shipped in resources/models/demo-vision/: what the tests and the chat rely on.

Made by tools/make_vision_model.py (torch, not an app dependency), so these tests only read it:
two small files described exactly by the run's report; a ``qwen35`` trunk with its nextn block and
Qwen's vision tokens; a ``qwen3vl`` projector whose output width is the trunk's; and a head that
drafts text well in the app's llama.cpp backend, with speculative output equal to plain decoding.
"""

from __future__ import annotations

import hashlib
import json

import gguf
import llama_cpp
import llama_cpp.mtmd_cpp as mtmd

from app.engine.runtime.backends.gguf_info import read_gguf_summary
from app.engine.runtime.backends.llama_cpp.backend import LlamaCppBackend
from app.engine.runtime.chat_format.prompting import ChatMessage
from app.engine.runtime.core.backend import LoadSettings
from app.engine.runtime.core.demo_model import (
    DEMO_VISION_DIR,
    DEMO_VISION_MODEL,
    DEMO_VISION_PROJECTOR,
)
from app.engine.runtime.core.request import GenerationRequest
from app.engine.runtime.speculative.generation import generate

MAX_TOTAL_BYTES = 5 * 2**20
MIN_DEPTH1_ACCEPTANCE = 0.5  # measured ~0.85 (llama.cpp, these requests); a broken head gets ~0
REQUESTS = (
    "Return the sum of the squares of the numbers in a list.",
    "Remove a file, ignoring the error if it does not exist.",
    "Read a configuration file and return its sections as a dictionary.",
)


def field(reader: gguf.GGUFReader, key: str):
    return reader.fields[key].contents()


def test_two_small_files_described_exactly_by_the_report() -> None:
    report = json.loads((DEMO_VISION_DIR / "vision_report.json").read_text())
    listed = {entry["path"]: entry for entry in report["files"]}
    assert set(listed) == {DEMO_VISION_MODEL.name, DEMO_VISION_PROJECTOR.name}
    total = 0
    for name, entry in listed.items():
        data = (DEMO_VISION_DIR / name).read_bytes()
        assert (len(data), hashlib.sha256(data).hexdigest()) == (entry["bytes"], entry["sha256"])
        total += len(data)
    assert total < MAX_TOTAL_BYTES
    assert report["image_check"]["logits_finite"] and report["vision_tower"]["trained"] is False


def test_the_trunk_is_qwen35_with_its_nextn_block_and_qwens_vision_tokens() -> None:
    summary = read_gguf_summary(DEMO_VISION_MODEL)
    assert (summary.architecture, summary.nextn_layers) == ("qwen35", 1)
    reader = gguf.GGUFReader(DEMO_VISION_MODEL)
    tokens = field(reader, "tokenizer.ggml.tokens")
    assert tokens[4096:4100] == [
        "<|vision_start|>",
        "<|vision_end|>",
        "<|image_pad|>",
        "<|video_pad|>",
    ]
    assert "<|vision_start|><|image_pad|><|vision_end|>" in summary.chat_template


def test_the_projector_is_qwen3vl_and_feeds_the_trunks_width() -> None:
    projector = gguf.GGUFReader(DEMO_VISION_PROJECTOR)
    assert field(projector, "general.architecture") == "clip"
    assert field(projector, "clip.projector_type") == "qwen3vl_merger"
    assert field(projector, "clip.has_vision_encoder") is True
    assert field(projector, "clip.vision.projection_dim") == field(
        gguf.GGUFReader(DEMO_VISION_MODEL), "qwen35.embedding_length"
    )
    caps = mtmd.mtmd_get_cap_from_file(str(DEMO_VISION_PROJECTOR).encode())
    assert caps.inp_vision and not caps.inp_audio
    assert llama_cpp.__version__ == "0.3.36"


def test_its_head_drafts_text_well_and_exactly_in_the_apps_backend() -> None:
    backend = LlamaCppBackend(DEMO_VISION_MODEL, LoadSettings(threads=1, context_length=1024))
    try:
        assert backend.info.mtp_available, backend.info.mtp_unavailable_reason
        drafted = accepted = 0
        for text in REQUESTS:
            request = (ChatMessage("user", text),)
            plain, drafting = (
                generate(
                    backend,
                    GenerationRequest(messages=request, max_tokens=48, mtp_depth=depth),
                    emit=lambda _chunk: None,
                    cancelled=lambda: False,
                )
                for depth in (0, 2)
            )
            assert drafting.token_ids == plain.token_ids
            drafted += drafting.stats.drafted_by_depth[0]
            accepted += drafting.stats.accepted_by_depth[0]
    finally:
        backend.close()
    assert drafted >= 30
    assert accepted / drafted >= MIN_DEPTH1_ACCEPTANCE, f"{accepted}/{drafted}"
