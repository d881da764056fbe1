"""The --wide stand-in: F× the FFN bytes, the same function, so the same greedy tokens."""

from __future__ import annotations

from pathlib import Path

import pytest
from gguf import GGUFReader

from app.engine.errors import RuntimeBackendError
from app.engine.runtime.backends.llama_cpp.backend import LlamaCppBackend
from app.engine.runtime.bench.wide_model import widened_copy
from app.engine.runtime.chat_format.prompting import ChatMessage
from app.engine.runtime.core.backend import LoadSettings
from app.engine.runtime.core.demo_model import demo_model_path
from app.engine.runtime.core.request import GenerationRequest
from app.engine.runtime.speculative.generation import generate

FACTOR = 4


@pytest.fixture(scope="module")
def widened(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return widened_copy(demo_model_path(), FACTOR, tmp_path_factory.mktemp("wide"))


def _greedy_tokens(model: Path, depth: int) -> list[tuple[int, ...]]:
    backend = LlamaCppBackend(model, LoadSettings(threads=1, context_length=512))
    try:
        return [
            generate(
                backend,
                GenerationRequest(
                    messages=(ChatMessage("user", prompt),), max_tokens=40, mtp_depth=depth
                ),
                emit=lambda _c: None,
                cancelled=lambda: False,
            ).token_ids
            for prompt in ("Return the number of lines in a file.", "Reverse a string.")
        ]
    finally:
        backend.close()


@pytest.mark.slow
def test_every_ffn_is_widened_and_nothing_else_changes(widened: Path) -> None:
    original, wide = GGUFReader(demo_model_path()), GGUFReader(widened)
    assert wide.fields["qwen35.feed_forward_length"].contents() == FACTOR * (
        original.fields["qwen35.feed_forward_length"].contents()
    )
    before = {tensor.name: tensor for tensor in original.tensors}
    widened_ffn = 0
    for tensor in wide.tensors:
        source = before[tensor.name]
        shape, old = [int(n) for n in tensor.shape], [int(n) for n in source.shape]
        assert tensor.tensor_type == source.tensor_type
        rows, row_bytes = source.data.shape if source.data.ndim == 2 else (0, 0)
        if ".ffn_down." in tensor.name:  # ggml order (FFN channels, outputs): wider rows
            assert shape == [old[0] * FACTOR, old[1]]
            kept, added = tensor.data[:, :row_bytes], tensor.data[:, row_bytes:]
        elif ".ffn_gate." in tensor.name or ".ffn_up." in tensor.name:  # more rows
            assert shape == [old[0], old[1] * FACTOR]
            kept, added = tensor.data[:rows], tensor.data[rows:]
        else:
            assert shape == old and bytes(tensor.data) == bytes(source.data)
            continue
        widened_ffn += 1
        assert bytes(kept) == bytes(source.data)
        assert added.size and not added.any()  # the new channels are zero blocks
    assert widened_ffn == 3 * original.fields["qwen35.block_count"].contents()


@pytest.mark.slow
def test_the_stand_in_decodes_the_same_greedy_tokens(widened: Path) -> None:
    demo = demo_model_path()
    assert widened.stat().st_size > 2 * demo.stat().st_size
    for depth in (0, 2):
        assert _greedy_tokens(widened, depth) == _greedy_tokens(demo, depth)


def test_a_factor_below_one_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RuntimeBackendError, match="--wide 0 is invalid"):
        widened_copy(demo_model_path(), 0, tmp_path)
    assert list(tmp_path.iterdir()) == []


VOCAB = 151936  # Qwen3's


@pytest.fixture(scope="module")
def wide_vocabulary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return widened_copy(demo_model_path(), 1, tmp_path_factory.mktemp("vocab"), vocab=VOCAB)


@pytest.mark.slow
def test_the_vocabulary_stand_in_pads_tokens_and_their_rows_with_zeros(
    wide_vocabulary: Path,
) -> None:
    original, padded = GGUFReader(demo_model_path()), GGUFReader(wide_vocabulary)
    tokens = original.fields["tokenizer.ggml.tokens"].contents()
    padded_tokens = padded.fields["tokenizer.ggml.tokens"].contents()
    assert len(padded_tokens) == VOCAB and padded_tokens[: len(tokens)] == tokens
    assert padded_tokens[-1] == f"[PAD{VOCAB - 1}]"  # as llama.cpp's converter pads
    types = padded.fields["tokenizer.ggml.token_type"].contents()
    assert len(types) == VOCAB and set(types[len(tokens) :]) == {5}  # unused
    before = {tensor.name: tensor for tensor in original.tensors}
    for tensor in padded.tensors:
        source = before[tensor.name]
        if tensor.name in ("token_embd.weight", "output.weight"):
            assert tensor.data.shape[0] == VOCAB
            assert bytes(tensor.data[: len(tokens)]) == bytes(source.data)
            assert not tensor.data[len(tokens) :].any()
        else:
            assert bytes(tensor.data) == bytes(source.data)


@pytest.mark.slow
def test_the_vocabulary_stand_in_has_the_width_and_the_same_greedy_tokens(
    wide_vocabulary: Path,
) -> None:
    backend = LlamaCppBackend(wide_vocabulary, LoadSettings(threads=1, context_length=256))
    try:
        assert backend.info.vocab_size == VOCAB
        assert backend.prefill([1, 2, 3], with_mtp=False).shape == (VOCAB,)
    finally:
        backend.close()
    for depth in (0, 2):
        assert _greedy_tokens(wide_vocabulary, depth) == _greedy_tokens(demo_model_path(), depth)


def test_a_vocabulary_smaller_than_the_models_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RuntimeBackendError, match=r"--vocab 100 is smaller than demo-mtp\.gguf"):
        widened_copy(demo_model_path(), 1, tmp_path, vocab=100)
    assert list(tmp_path.iterdir()) == []
