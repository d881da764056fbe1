"""The llama.cpp backend as a user meets it: text, chat template, fallbacks and bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from app.engine.errors import RuntimeBackendError
from app.engine.runtime.backends.choice import resolve_backend
from app.engine.runtime.backends.llama_cpp.backend import LlamaCppBackend
from app.engine.runtime.chat_format.detokenizer import StreamingDetokenizer
from app.engine.runtime.chat_format.prompting import ChatMessage
from app.engine.runtime.core.backend import LoadSettings
from app.engine.runtime.core.request import GenerationRequest, GenerationResult
from app.engine.runtime.sampling.logprobs import LogprobReader
from app.engine.runtime.speculative.generation import generate, prompt_tokens


def _generate(backend: LlamaCppBackend, request: GenerationRequest) -> GenerationResult:
    return generate(backend, request, emit=lambda _chunk: None, cancelled=lambda: False)


def _special(backend: LlamaCppBackend, text: str) -> int:
    (token,) = backend.tokenize(text, parse_special=True)
    return token


def test_model_info_reports_the_mtp_head(backend: LlamaCppBackend) -> None:
    info = backend.info
    assert info.architecture == "qwen35"
    assert info.mtp_layers == 1 and info.mtp_available and info.max_draft_depth == 4
    assert info.context_length == 1024 and info.has_chat_template


def test_special_tokens_never_reach_the_text(backend: LlamaCppBackend) -> None:
    im_start, im_end = _special(backend, "<|im_start|>"), _special(backend, "<|im_end|>")
    assert backend.token_bytes(im_start) == b"" and backend.token_bytes(im_end) == b""
    assert backend.is_end_of_generation(im_end) and not backend.is_end_of_generation(im_start)
    word = backend.tokenize("héllo wörld", parse_special=False)
    detokenizer = StreamingDetokenizer(backend.token_bytes)
    text = "".join(detokenizer.add([token, im_start]) for token in word) + detokenizer.flush()
    assert text == "héllo wörld"


def test_special_tokens_among_log_probability_alternatives_are_shown_by_name(
    backend: LlamaCppBackend,
) -> None:
    im_start, im_end = _special(backend, "<|im_start|>"), _special(backend, "<|im_end|>")
    word = backend.tokenize("Once", parse_special=False)[0]
    spelled = backend.token_bytes(word)
    row = np.zeros(backend.info.vocab_size, dtype=np.float32)
    row[[im_end, im_start, word]] = [6.0, 5.0, 4.0]
    entry = LogprobReader(backend.token_bytes, backend.token_text, 3).read(row, word)
    assert [top.text for top in entry.top] == ["<|im_end|>", "<|im_start|>", spelled.decode()]
    assert [top.piece for top in entry.top] == [b"", b"", spelled]
    assert entry.text == spelled.decode() != ""


def test_a_split_character_waits_for_its_second_byte(backend: LlamaCppBackend) -> None:
    first_byte, second_byte = backend.tokenize("é", parse_special=False)
    detokenizer = StreamingDetokenizer(backend.token_bytes)
    assert detokenizer.add([first_byte]) == ""
    assert detokenizer.add([second_byte]) == "é"


def test_chat_prompts_use_the_models_template(backend: LlamaCppBackend) -> None:
    request = GenerationRequest(messages=(ChatMessage("user", "Hi there"),))
    expected = "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n"
    tokens = prompt_tokens(backend, request)
    assert tokens == backend.tokenize(expected, parse_special=True)
    assert tokens.count(_special(backend, "<|im_start|>")) == 2


def test_a_raw_prompt_keeps_special_looking_text_as_text(backend: LlamaCppBackend) -> None:
    tokens = prompt_tokens(backend, GenerationRequest(prompt="<|im_start|>"))
    assert _special(backend, "<|im_start|>") not in tokens
    assert len(tokens) > 1


def test_streamed_chunks_add_up_to_the_result(backend: LlamaCppBackend) -> None:
    chunks = []
    request = GenerationRequest(prompt="Once upon a time", max_tokens=40, mtp_depth=3)
    result = generate(backend, request, emit=chunks.append, cancelled=lambda: False)
    assert [t for chunk in chunks for t in chunk.token_ids] == list(result.token_ids)
    assert "".join(chunk.text for chunk in chunks) == result.text
    assert chunks[-1].stats.generated_tokens == len(result.token_ids) == 40
    assert result.finish_reason == "length"
    assert result.stats.prompt_tokens == result.prompt_token_count
    assert 0 < result.stats.ttft_seconds <= result.stats.elapsed_seconds


def test_a_gguf_without_nextn_runs_plain_decoding_and_says_why(
    tiny_models: dict[str, Path],
) -> None:
    plain_only = LlamaCppBackend(tiny_models["no_mtp"], LoadSettings(threads=1))
    try:
        assert not plain_only.info.mtp_available
        result = _generate(plain_only, GenerationRequest(prompt="Hello", max_tokens=8))
    finally:
        plain_only.close()
    assert result.stats.mode == "ar" and len(result.token_ids) == 8
    assert result.note is not None
    assert "tiny-no-mtp.gguf has no MTP block" in result.note
    assert "qwen35.nextn_predict_layers" in result.note


def test_more_mtp_blocks_than_llama_cpp_runs_falls_back_instead_of_aborting(
    tiny_models: dict[str, Path],
) -> None:
    # llama.cpp's qwen35 MTP graph asserts a single nextn block: creating it would abort.
    backend = LlamaCppBackend(tiny_models["two_mtp_blocks"], LoadSettings(threads=1))
    try:
        result = _generate(backend, GenerationRequest(prompt="Hello", max_tokens=4))
    finally:
        backend.close()
    assert result.stats.mode == "ar"
    assert "declares 2 MTP blocks" in (result.note or "")


def test_a_prompt_longer_than_the_context_is_a_clear_error(backend: LlamaCppBackend) -> None:
    too_long = GenerationRequest(prompt="abc " * 1000, max_tokens=4)
    with pytest.raises(
        RuntimeBackendError, match=r"context window of tiny-mtp\.gguf is 1024.*--ctx"
    ):
        _generate(backend, too_long)
    again = _generate(backend, GenerationRequest(prompt="Still usable", max_tokens=4))
    assert len(again.token_ids) == 4


def test_generation_stops_when_the_context_is_full(tiny_models: dict[str, Path]) -> None:
    small = LlamaCppBackend(tiny_models["mtp"], LoadSettings(threads=1, context_length=32))
    try:
        context = small.info.context_length  # llama.cpp rounds the size up to its padding
        result = _generate(
            small, GenerationRequest(prompt="Fill the window", max_tokens=5000, mtp_depth=3)
        )
    finally:
        small.close()
    assert 32 <= context < 5000
    assert result.finish_reason == "context"
    # every position holds a committed token, plus the last one sampled from the final logits
    assert result.prompt_token_count + len(result.token_ids) == context + 1


def test_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.gguf"
    with pytest.raises(RuntimeBackendError, match=r"model file not found: .*nowhere\.gguf"):
        resolve_backend("auto", missing)
    with pytest.raises(RuntimeBackendError, match="model file not found"):
        LlamaCppBackend(missing, LoadSettings())


def test_a_file_that_is_not_gguf_is_a_clear_error(tmp_path: Path) -> None:
    not_gguf = tmp_path / "notes.gguf"
    not_gguf.write_text("these are notes, not a model\n")
    with pytest.raises(RuntimeBackendError, match=r"notes\.gguf is not a readable GGUF file"):
        resolve_backend("llama.cpp", not_gguf)


def test_a_truncated_gguf_is_a_clear_error(tiny_models: dict[str, Path], tmp_path: Path) -> None:
    truncated = tmp_path / "truncated.gguf"
    truncated.write_bytes(tiny_models["mtp"].read_bytes()[:60_000])
    with pytest.raises(RuntimeBackendError, match=r"truncated\.gguf"):
        LlamaCppBackend(truncated, LoadSettings(threads=1))


def test_a_gguf_on_the_mlx_backend_is_a_clear_error(tiny_models: dict[str, Path]) -> None:
    with pytest.raises(RuntimeBackendError, match="the MLX backend runs model folders"):
        resolve_backend("mlx", tiny_models["mtp"])
    with pytest.raises(RuntimeBackendError, match="unknown backend 'vllm'"):
        resolve_backend("vllm", tiny_models["mtp"])
