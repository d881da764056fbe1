"""Prefix reuse on the MLX backend (the demo's BF16 folder): a prompt that shares a prefix with
kept state gives what a fresh prefill gives.

Each turn runs through the real generation loop twice: on a backend that keeps its states
across the scenario, and on a reference backend reset before the turn. The logits of the last
prompt token, the MTP head's first draft rows (a wrong head row would not change greedy tokens,
only these and the acceptance), the greedy tokens and the acceptance counts must match; and
``last_prefix_reuse`` must say the prompt reused what the scenario leaves to reuse.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import mlx.core as mx
import numpy as np
import pytest

from app.engine.runtime.backends.mlx import backend as mlx_backend
from app.engine.runtime.backends.mlx.backend import MlxBackend
from app.engine.runtime.backends.prefix_cache import CHECKPOINT_MIN_GAP, SAVE_MIN_TOKENS
from app.engine.runtime.chat_format.prompting import ChatMessage
from app.engine.runtime.core.backend import LoadSettings, PrefixReuse
from app.engine.runtime.core.request import GenerationRequest, GenerationResult
from app.engine.runtime.sampling.sampler import SamplerSettings
from app.engine.runtime.speculative.generation import generate, prompt_tokens
from tests.runtime.mlx.conftest import DEMO_HF, SETTINGS
from tests.runtime.mlx.tiny_models import GLM4_MOE, write_nextn_sidecar, write_tiny_folder

GREEDY = SamplerSettings(temperature=0.0)
TOKENS = 12
STORY = (
    "I keep a lighthouse on a small rocky island. Every evening I climb the stairs, trim the "
    "wick, polish the lens and watch the ships pass. Write me a short story about a night when "
    "the lamp failed during a storm and a fishing boat was still out at sea."
)
MIB = 1024 * 1024


class _Recording:
    """The backend as generate() sees it, recording the prefill's logits and the first draft."""

    def __init__(self, backend: MlxBackend) -> None:
        self._backend = backend
        self.prefill_logits: np.ndarray | None = None
        self.first_draft: np.ndarray | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backend, name)

    def prefill(self, tokens: Sequence[int], **options: Any) -> np.ndarray:
        self.prefill_logits = self._backend.prefill(tokens, **options)
        return self.prefill_logits

    def draft(self, last_token: int, depth: int, choose: Any) -> Any:
        rows: list[np.ndarray] = []

        def keep_row(index: int, row: np.ndarray) -> int:
            rows.append(np.array(row))
            return choose(index, row)

        result = self._backend.draft(last_token, depth, keep_row)
        if self.first_draft is None and depth > 0:
            self.first_draft = np.stack(rows)[: len(result.tokens)]  # rows the drafts came from
        return result


@dataclass(frozen=True)
class Turn:
    result: GenerationResult
    reuse: PrefixReuse
    prompt_length: int


def _messages(*texts: str) -> tuple[ChatMessage, ...]:
    return tuple(
        ChatMessage("user" if index % 2 == 0 else "assistant", text)
        for index, text in enumerate(texts)
    )


def _run(
    backend: MlxBackend, messages: tuple[ChatMessage, ...], depth: int
) -> tuple[GenerationResult, _Recording]:
    request = GenerationRequest(
        messages=messages, max_tokens=TOKENS, sampler=GREEDY, mtp_depth=depth
    )
    recording = _Recording(backend)
    result = generate(
        recording,  # type: ignore[arg-type]
        request,
        emit=lambda _chunk: None,
        cancelled=lambda: False,
    )
    return result, recording


def _max_diff(first: np.ndarray | None, second: np.ndarray | None) -> float:
    assert first is not None and second is not None
    assert first.shape == second.shape
    assert np.array_equal(np.argmax(first, axis=-1), np.argmax(second, axis=-1))
    return float(np.max(np.abs(first - second)))


def _assert_close(diff: float) -> None:
    if mx.default_device() == mx.cpu:
        assert diff == 0.0  # mlx on the CPU computes the same rows the same way, bit for bit
    else:
        assert diff <= 1e-3


def _turn(
    backend: MlxBackend, reference: MlxBackend, messages: tuple[ChatMessage, ...], depth: int = 2
) -> Turn:
    """One turn on ``backend`` (reusing what it kept) checked against a fresh ``reference``."""
    result, kept = _run(backend, messages, depth)
    reuse = backend.last_prefix_reuse
    reference.reset()
    fresh_result, fresh = _run(reference, messages, depth)
    length = len(prompt_tokens(backend, GenerationRequest(messages=messages)))
    assert reference.last_prefix_reuse == PrefixReuse(0, length, "")
    assert reuse.reused_tokens + reuse.computed_tokens == length
    logits_diff = _max_diff(kept.prefill_logits, fresh.prefill_logits)
    draft_diff = _max_diff(kept.first_draft, fresh.first_draft) if depth else 0.0
    print(
        f"{reuse}: max abs diff of the last prompt token's logits {logits_diff:.3g}, "
        f"of the first draft rows {draft_diff:.3g}"
    )
    _assert_close(logits_diff)
    _assert_close(draft_diff)
    assert result.token_ids == fresh_result.token_ids
    assert result.stats.accepted_by_depth == fresh_result.stats.accepted_by_depth
    assert result.stats.prompt_reused_tokens == reuse.reused_tokens
    return Turn(result, reuse, length)


@pytest.fixture(scope="module")
def reference() -> Iterator[MlxBackend]:
    backend = MlxBackend(DEMO_HF, SETTINGS)
    yield backend
    backend.close()


@pytest.mark.slow
def test_chat_turns_a_regenerate_and_an_edit_reuse_kept_state_exactly(
    bf16: MlxBackend, reference: MlxBackend
) -> None:
    bf16.reset()
    first = _messages("Tell me a short story about a lighthouse keeper.")
    turn1 = _turn(bf16, reference, first)
    assert turn1.reuse == PrefixReuse(0, turn1.prompt_length, "")

    second = _messages(*(m.content for m in first), turn1.result.text, "Make it shorter.")
    turn2 = _turn(bf16, reference, second)
    # turn 1's prompt and reply (but its last token) are still the live state
    assert turn2.reuse.source == "live"
    assert turn2.reuse.reused_tokens >= turn1.prompt_length + len(turn1.result.token_ids) - 1

    # turn 2 computed fewer than CHECKPOINT_MIN_GAP tokens in one batch (no mark inside it):
    # the same prompt again resumes where that batch began, the end of turn 1's reply
    regenerate = _turn(bf16, reference, second)
    assert regenerate.reuse == PrefixReuse(
        turn2.reuse.reused_tokens, turn2.reuse.computed_tokens, "checkpoint"
    )
    assert regenerate.reuse.computed_tokens <= CHECKPOINT_MIN_GAP

    third = _messages(*(m.content for m in second), regenerate.result.text, "Now as a poem.")
    turn3 = _turn(bf16, reference, third)
    assert turn3.reuse.source == "live"

    # the second user message is edited: the history changes in the middle
    edited = _messages(
        first[0].content, turn1.result.text, "Make it longer.", regenerate.result.text, "A poem."
    )
    edit = _turn(bf16, reference, edited)
    assert edit.reuse.source == "checkpoint"
    edit_at = len(prompt_tokens(bf16, GenerationRequest(messages=second[:2])))
    assert turn1.prompt_length <= edit.reuse.reused_tokens <= edit_at
    assert bf16.kept_state_bytes > 0


@pytest.mark.slow
def test_a_conversation_switched_away_from_and_back_to_is_restored(
    bf16: MlxBackend, reference: MlxBackend
) -> None:
    bf16.reset()
    story = _messages(STORY)
    turn1 = _turn(bf16, reference, story)
    assert turn1.prompt_length + TOKENS > SAVE_MIN_TOKENS

    other = _turn(bf16, reference, _messages("Explain what a hash table is."))
    assert other.reuse.reused_tokens < 8  # only the template's first tokens are shared

    back = _messages(STORY, turn1.result.text, "Give the keeper a name.")
    turn2 = _turn(bf16, reference, back)
    assert turn2.reuse.source == "saved"
    # at least up to the checkpoint before turn 1's last prompt token (the reply's text may
    # tokenize otherwise than the tokens generated)
    assert turn2.reuse.reused_tokens >= turn1.prompt_length - 1


@pytest.mark.slow
def test_an_edit_past_a_checkpoint_interval_resumes_at_the_interval_mark(
    bf16: MlxBackend, reference: MlxBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a real interval (1024 tokens) takes minutes to prefill with mlx's CPU ops: same code, 64
    interval = CHECKPOINT_MIN_GAP
    monkeypatch.setattr(mlx_backend, "CHECKPOINT_INTERVAL", interval)
    bf16.reset()
    turn1 = _turn(bf16, reference, _messages(STORY))
    assert turn1.prompt_length > interval
    # the end of the story changes: the prompt diverges a few tokens before its end
    edited = _messages(STORY.replace("still out at sea", "lost in the fog"))
    tokens = prompt_tokens(bf16, GenerationRequest(messages=edited))
    original = prompt_tokens(bf16, GenerationRequest(messages=_messages(STORY)))
    diverge = next(i for i, (a, b) in enumerate(zip(tokens, original, strict=False)) if a != b)
    assert interval < diverge < turn1.prompt_length - 1
    edit = _turn(bf16, reference, edited, depth=2)
    assert edit.reuse == PrefixReuse(interval, len(tokens) - interval, "checkpoint")


@pytest.mark.slow
def test_plain_and_mtp_requests_alternate_exactly(bf16: MlxBackend, reference: MlxBackend) -> None:
    bf16.reset()
    texts = ["Explain what a hash table is."]
    turns = []
    for depth in (0, 2, 0, 3):
        turn = _turn(bf16, reference, _messages(*texts), depth=depth)
        turns.append(turn)
        texts += [turn.result.text, f"Say more about point {len(turns)}."]
    # the head ran no rows for turn 1's plain request: the MTP turn recomputes it all
    assert turns[1].reuse.reused_tokens == 0
    # a plain request needs no head: it continues the MTP turn's live state
    assert turns[2].reuse.source == "live"
    # the head is behind after the plain turn 3: turn 4 resumes where turn 3 began, the end of
    # turn 2's reply, which the head covers
    assert turns[3].reuse.source == "checkpoint"
    assert turns[3].reuse.reused_tokens >= turns[1].prompt_length


@pytest.mark.slow
def test_kept_states_stay_within_the_budget(reference: MlxBackend) -> None:
    # a checkpoint of the demo's recurrent state is ~0.4 MiB: 1 MiB keeps two
    tiny = MlxBackend(DEMO_HF, LoadSettings(context_length=1024, state_cache_mib=1))
    texts = [STORY]
    first_prompt = 0
    for turn_index in range(3):
        turn = _turn(tiny, reference, _messages(*texts), depth=0)
        first_prompt = first_prompt or turn.prompt_length
        assert 0 < tiny.kept_state_bytes <= MIB
        if turn_index:
            assert turn.reuse.source == "live"
        texts += [turn.result.text, "Go on."]
    # turn 1 kept a checkpoint before its last token, for a regenerate; the ends of turns 1 and
    # 2's replies, kept since, have evicted it
    regenerate = _turn(tiny, reference, _messages(texts[0]), depth=0)
    assert first_prompt - 1 >= CHECKPOINT_MIN_GAP
    assert regenerate.reuse.reused_tokens < first_prompt - 1
    assert tiny.kept_state_bytes <= MIB
    tiny.close()

    nothing = MlxBackend(DEMO_HF, LoadSettings(context_length=1024, state_cache_mib=0))
    turn1 = _turn(nothing, reference, _messages(texts[0]), depth=0)
    turn2 = _turn(nothing, reference, _messages(*texts[:2], "Go on."), depth=0)
    assert turn2.reuse.source == "live"  # the live state needs no budget
    again = _turn(nothing, reference, _messages(*texts[:2], "Go on."), depth=0)
    assert again.reuse.reused_tokens < turn1.prompt_length
    assert nothing.kept_state_bytes == 0
    nothing.close()


def test_reset_forgets_every_kept_state(bf16: MlxBackend) -> None:
    bf16.reset()
    tokens = prompt_tokens(bf16, GenerationRequest(messages=_messages(STORY)))
    bf16.prefill(tokens, with_mtp=True)
    bf16.prefill(tokens, with_mtp=True)
    assert bf16.last_prefix_reuse == PrefixReuse(len(tokens) - 1, 1, "checkpoint")
    assert bf16.kept_state_bytes > 0
    bf16.reset()
    assert bf16.kept_state_bytes == 0
    bf16.prefill(tokens, with_mtp=True)
    assert bf16.last_prefix_reuse == PrefixReuse(0, len(tokens), "")


@pytest.mark.slow
def test_an_attention_only_model_trims_its_state_anywhere(tmp_path: Any) -> None:
    folder = write_tiny_folder(tmp_path / "glm", GLM4_MOE)
    sidecar = write_nextn_sidecar(tmp_path / "mtp.safetensors", GLM4_MOE)
    backend, reference = (MlxBackend(folder, SETTINGS, sidecar) for _ in range(2))
    texts = ["Once upon a time"]
    turn1 = _turn(backend, reference, _messages(*texts))
    texts += [turn1.result.text, "and then"]
    turn2 = _turn(backend, reference, _messages(*texts))
    assert turn2.reuse.source == "live"
    regenerate = _turn(backend, reference, _messages(*texts))
    assert regenerate.reuse == PrefixReuse(turn2.prompt_length - 1, 1, "trimmed")
    plain = _turn(backend, reference, _messages(*texts, regenerate.result.text, "more"), 0)
    # the random model's reply text tokenizes otherwise than its tokens: "trimmed" within it
    assert plain.reuse.source in ("live", "trimmed")
    assert plain.reuse.reused_tokens >= regenerate.prompt_length
    # the head is behind the plain turn: the MTP turn resumes where the head still covers
    edited = _turn(backend, reference, _messages(*texts, regenerate.result.text, "less"))
    assert edited.reuse.source == "trimmed"
    assert edited.reuse.reused_tokens >= turn2.prompt_length
