"""One request, end to end: prompt → prefill → plain or speculative decoding → result.

This is the backend-agnostic loop the worker process runs. It owns the stop rules (end-of-turn
token, ``max_tokens``, a full context, cancellation), holds every token to the request's grammar
when it has one (a JSON schema, a forced tool call), turns tokens into text without special
tokens, and reports a :class:`TokenChunk` (tokens, text, statistics so far) after every plain
step or speculative cycle.
"""

from __future__ import annotations

import json
import secrets
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from app.engine.errors import RuntimeBackendError
from app.engine.runtime.chat_format.constraint import GrammarState, masked
from app.engine.runtime.chat_format.detokenizer import StreamingDetokenizer
from app.engine.runtime.chat_format.end_tokens import EndTokensHeld, TokenRule
from app.engine.runtime.chat_format.prompting import ChatMessage
from app.engine.runtime.chat_format.tools import forced_call_constraint
from app.engine.runtime.core.backend import DecodeBackend
from app.engine.runtime.core.prompt import prompt_token_ids
from app.engine.runtime.core.request import GenerationRequest, GenerationResult, TokenChunk
from app.engine.runtime.core.stats import StatsRecorder
from app.engine.runtime.sampling.draft_confidence import ConfidenceStop
from app.engine.runtime.sampling.logprobs import LogprobReader, TokenLogprob
from app.engine.runtime.sampling.penalties import Penalties
from app.engine.runtime.sampling.sampler import sample
from app.engine.runtime.speculative.cycle import CycleTokens, SpeculativeDecoder
from app.engine.runtime.speculative.depth_policy import DepthPolicies, DepthPolicy
from app.engine.runtime.speculative.draft_health import DraftWatch
from app.engine.runtime.speculative.history_fit import fit_history, left_out_note

LANE_SWITCH_TOKENS = 256
"""An adaptive depth's check of the losing way (plain vs drafting) waits for a request that
recomputes fewer than this many more prompt tokens than the winning way would."""

ChunkSink = Callable[[TokenChunk], None]
CancelCheck = Callable[[], bool]


_END_TOKENS: weakref.WeakKeyDictionary[DecodeBackend, np.ndarray] = weakref.WeakKeyDictionary()
"""Each backend's end-of-generation tokens as a boolean row, read once per loaded model."""


def grammar_state(backend: DecodeBackend, request: GenerationRequest) -> TokenRule | None:
    """What masks the request's tokens, if anything: its grammar (a JSON schema, a forced
    call), with the end tokens held back under ``min_tokens`` or ``ignore_eos``."""
    constraint = request.constraint or forced_call_constraint(
        request.tools, request.tool_choice, marker=lambda text: _grammar_marker(backend, text)
    )
    grammar: TokenRule | None = None
    if constraint is not None:
        grammar = GrammarState(constraint, backend.grammar_tokenizer(), backend.info.vocab_size)
    if request.ignore_eos or request.min_tokens > 0:
        until = None if request.ignore_eos else request.min_tokens
        return EndTokensHeld(grammar, _end_tokens(backend), until)
    return grammar


def _end_tokens(backend: DecodeBackend) -> np.ndarray:
    ends = _END_TOKENS.get(backend)
    if ends is None:
        size = backend.info.vocab_size
        ends = np.fromiter((backend.is_end_of_generation(t) for t in range(size)), bool, size)
        _END_TOKENS[backend] = ends
    return ends


def _token_rules(
    backend: DecodeBackend, request: GenerationRequest, prompt: Sequence[int]
) -> tuple[TokenRule | None, Penalties]:
    """What holds the reply's tokens: the grammar, if any, and the penalties and bias (counting
    from ``prompt``)."""
    return grammar_state(backend, request), Penalties(
        request.sampler, prompt, backend.info.vocab_size
    )


def _grammar_marker(backend: DecodeBackend, text: str) -> str:
    """``text`` as a grammar terminal: the model's own special token for it where it has one
    (Qwen's ``<tool_call>``), else the text spelled out."""
    ids = backend.tokenize(text, parse_special=True)
    if len(ids) == 1 and backend.grammar_tokenizer().is_special_token(ids[0]):
        return f"<[{ids[0]}]>"
    return json.dumps(text)


def next_token(
    logits: np.ndarray,
    grammar: TokenRule | None,
    request: GenerationRequest,
    rng: np.random.Generator,
    penalties: Penalties,
) -> int:
    """Sample the next token (among those the grammar allows, under the penalties and bias)
    and advance the grammar and the penalties' counts."""
    if grammar is None:
        token = sample(logits, request.sampler, rng, penalties.edits())
    else:
        token = sample(masked(logits, grammar.allowed()), request.sampler, rng, penalties.edits())
        grammar.consume(token)
    penalties.push(token)
    return token


def prompt_tokens(backend: DecodeBackend, request: GenerationRequest) -> list[int]:
    """The prompt as token ids (:func:`prompt_token_ids`: chat template applied, an image as the
    cells it fills, BOS added when the model wants one), checked to fit the context."""
    tokens = _token_ids(backend, request)
    if not tokens:
        raise RuntimeBackendError("the prompt is empty: type a message or pass --prompt TEXT")
    context = backend.info.context_length
    if len(tokens) >= context:
        raise RuntimeBackendError(
            f"the prompt is {len(tokens)} tokens but the context window of "
            f"{backend.info.path.name} is {context} tokens; shorten the prompt or load the model "
            "with a larger context (--ctx)"
        )
    return tokens


def _token_ids(
    backend: DecodeBackend,
    request: GenerationRequest,
    messages: Sequence[ChatMessage] | None = None,
    *,
    add_generation_prompt: bool = True,
) -> list[int]:
    """:func:`prompt_token_ids` on ``backend`` (an image refused with the backend's reason)."""
    return prompt_token_ids(
        backend,
        request,
        backend.info.path.name,
        messages,
        add_generation_prompt=add_generation_prompt,
        no_images_reason=backend.info.images_unavailable_reason,
    )


def last_user_message_start(
    backend: DecodeBackend, request: GenerationRequest, tokens: Sequence[int]
) -> tuple[int, ...]:
    """Where the last user message starts in ``tokens`` (empty when it cannot be told).

    The backend keeps a checkpoint there, so editing that message — or sending another one in
    its place — resumes right before it instead of at the previous checkpoint.
    """
    messages = request.messages
    users = [index for index, message in enumerate(messages) if message.role == "user"]
    if not users or users[-1] == 0 or backend.chat_template is None:
        return ()
    prefix = _token_ids(backend, request, messages[: users[-1]], add_generation_prompt=False)
    if 0 < len(prefix) < len(tokens) and list(tokens[: len(prefix)]) == prefix:
        return (len(prefix),)
    return ()


def _other_way_keeps_more(backend: DecodeBackend, tokens: Sequence[int], drafting: bool) -> bool:
    """True when running the request the other way (plain vs drafting) would recompute at least
    :data:`LANE_SWITCH_TOKENS` fewer prompt tokens (a backend may keep their states apart)."""
    here = backend.reusable_prefix(tokens, with_mtp=drafting)
    there = backend.reusable_prefix(tokens, with_mtp=not drafting)
    return there >= here + LANE_SWITCH_TOKENS


class _Output:
    """Collects committed tokens, applies the stop rules and emits chunks.

    A chunk goes out after the first token, then at most once per ``interval`` seconds, merging
    the steps in between (every token and the latest statistics), and when the reply ends: the
    text, the statistics snapshot and the chunk are made per chunk, not per token. When the
    request asks for log-probabilities, each kept token's is read from the raw row that chose
    it (:mod:`~app.engine.runtime.sampling.logprobs`).
    """

    def __init__(
        self,
        backend: DecodeBackend,
        request: GenerationRequest,
        recorder: StatsRecorder,
        emit: ChunkSink,
        interval: float,
    ) -> None:
        self._is_end = backend.is_end_of_generation
        self._max_tokens = request.max_tokens
        self._recorder = recorder
        self._emit = emit
        self._interval = interval
        self._next_emit = 0.0
        self._detokenizer = StreamingDetokenizer(backend.token_bytes)
        self._logprobs = (
            None
            if request.logprobs is None
            else LogprobReader(backend.token_bytes, backend.token_text, request.logprobs)
        )
        self.token_ids: list[int] = []
        self.logprobs: list[TokenLogprob] = []
        self.text_parts: list[str] = []
        self._sent = 0  # token_ids before this are in a chunk already
        self.finish_reason: str | None = None

    @property
    def remaining(self) -> int:
        return self._max_tokens - len(self.token_ids)

    @property
    def wants_rows(self) -> bool:
        """Whether steps must hand over their raw logits rows (log-probabilities asked for)."""
        return self._logprobs is not None

    def commit(self, tokens: Sequence[int], rows: np.ndarray | None = None) -> bool:
        """Take a step's tokens (and the raw rows that chose them, when :attr:`wants_rows`);
        True when a chunk went out (a moment to look for a cancel)."""
        kept = len(tokens)
        room = self._max_tokens - len(self.token_ids)
        for index, token in enumerate(tokens):
            if self._is_end(token):
                self.finish_reason, kept = "stop", index
                break
            if index + 1 >= room:
                self.finish_reason, kept = "length", index + 1
                break
        if self._recorder.ttft_seconds == 0.0:
            self._recorder.ttft_seconds = time.perf_counter() - self._recorder.started_at
        self.token_ids.extend(tokens[:kept] if kept < len(tokens) else tokens)
        if self._logprobs is not None and rows is not None:
            read = self._logprobs.read
            self.logprobs.extend(read(rows[index], tokens[index]) for index in range(kept))
        self._recorder.generated_tokens = len(self.token_ids)
        return self._emit_if_due()

    def stop(self, reason: str) -> None:
        """End early (cancelled, context full); a pending partial character is flushed."""
        self.finish_reason = reason
        self._emit_if_due()

    def _emit_if_due(self) -> bool:
        now = time.perf_counter()
        if self.finish_reason is None and now < self._next_emit:
            return False
        self._next_emit = now + self._interval
        tokens = tuple(self.token_ids[self._sent :])
        logprobs = tuple(self.logprobs[self._sent :])
        self._sent = len(self.token_ids)
        text = self._detokenizer.add(tokens)
        if self.finish_reason is not None:
            text += self._detokenizer.flush()
        self.text_parts.append(text)
        self._emit(TokenChunk(tokens, text, self._recorder.snapshot(), logprobs))
        return True


@dataclass(frozen=True)
class _DepthChoice:
    """How a request decodes: its draft ``depth`` (0: plainly), whether it ``drafting`` (an
    adaptive request may run plainly), the ``policy`` picking each cycle's depth, the draft
    ``watch`` of this model, the confidence ``stop`` when the request ends unsure drafts, and
    the ``note`` saying why MTP was turned off, if it was."""

    depth: int
    drafting: bool
    policy: DepthPolicy
    watch: DraftWatch
    stop: ConfidenceStop | None
    note: str | None


def _choose_depth(
    backend: DecodeBackend,
    request: GenerationRequest,
    policies: DepthPolicies,
    tokens: Sequence[int],
) -> _DepthChoice:
    note = None
    depth = request.mtp_depth
    if depth > 0 and not backend.info.mtp_available:
        note = backend.info.mtp_unavailable_reason
        depth = 0
    elif depth > backend.info.max_draft_depth:
        raise RuntimeBackendError(
            f"MTP depth {depth} exceeds the depth {backend.info.max_draft_depth} this model was "
            "loaded for; load it again with a larger maximum draft depth or lower --mtp-depth"
        )
    plain_only = backend.plain_only_reason(tokens) if depth > 0 else None
    if plain_only is not None:
        note, depth = plain_only, 0
    watch = policies.draft_health.watch(backend.info.path, backend.performance_fingerprint)
    if depth > 0 and watch.reason is not None:  # this backend's drafts were found garbage
        note, depth = watch.reason, 0
    policy = policies.for_request(
        depth,
        adaptive=request.adaptive_depth,
        model=backend.info.path,
        machine=backend.performance_fingerprint,
    )
    drafting = depth > 0 and policy.drafts_this_request
    stop = policies.confidence if request.stop_unsure_drafts else None
    if depth > 0 and _other_way_keeps_more(backend, tokens, drafting) and policy.put_off_check():
        drafting = policy.drafts_this_request
    return _DepthChoice(depth, drafting, policy, watch, stop, note)


Step = Callable[[int, int], CycleTokens]
"""One step of the loop: given the last token and the room left in the context, the tokens it
commits (one for a plain step, the accepted drafts and one more for a speculative cycle), with
the raw rows that chose them when log-probabilities are asked for."""


def _choose_step(
    backend: DecodeBackend,
    request: GenerationRequest,
    choice: _DepthChoice,
    sampling: tuple[TokenRule | None, np.random.Generator, Penalties],
    recorder: StatsRecorder,
    output: _Output,
) -> Step:
    """The step every iteration of this request runs: plain, plain and timed (an adaptive
    request the policy runs plainly), or a speculative cycle."""
    grammar, rng, penalties = sampling
    policy, watch = choice.policy, choice.watch
    clock = backend.cycle_clock

    sampler = request.sampler
    keep_rows = output.wants_rows

    def plain(last: int, _room: int) -> CycleTokens:
        logits = backend.step(last)
        rows = _raw_rows(logits, keep_rows)
        if grammar is None and not penalties.active:
            return CycleTokens((sample(logits, sampler, rng),), 0, 0, rows)
        return CycleTokens((next_token(logits, grammar, request, rng, penalties),), 0, 0, rows)

    def timed_plain(last: int, _room: int) -> CycleTokens:
        started, wall_started = clock(), time.perf_counter()
        logits = backend.step(last)
        rows = _raw_rows(logits, keep_rows)
        token = next_token(logits, grammar, request, rng, penalties)
        policy.observe(0, 0, clock() - started)
        recorder.verify_seconds += time.perf_counter() - wall_started
        recorder.verify_calls += 1
        recorder.record_cycle(0, 0)
        return CycleTokens((token,), 0, 0, rows)

    if choice.depth == 0:
        return plain
    if not choice.drafting:
        return timed_plain
    decoder = SpeculativeDecoder(
        backend,
        request.sampler,
        request.accept,
        rng,
        recorder,
        grammar,
        penalties,
        keep_rows=keep_rows,
    )
    stop = choice.stop

    def speculative(last: int, room: int) -> CycleTokens:
        cycle_depth = policy.choose(min(room, output.remaining - 1))
        if watch.reason is not None:  # found garbage in this request: plain from here on
            cycle_depth = 0
        started = clock()
        cycle = decoder.cycle(last, cycle_depth, stop)
        policy.observe(cycle.drafted, cycle.accepted, clock() - started)
        watch.observe(cycle.drafted, cycle.accepted)
        return cycle

    return speculative


def _raw_rows(logits: np.ndarray, keep: bool) -> np.ndarray | None:
    """A plain step's row as the one row of its step, copied before the backend reuses it."""
    return np.array(logits[None], dtype=np.float32) if keep else None


def generate(
    backend: DecodeBackend,
    request: GenerationRequest,
    *,
    emit: ChunkSink,
    cancelled: CancelCheck,
    depth_policies: DepthPolicies | None = None,
    chunk_interval: float = 0.0,
) -> GenerationResult:
    """Run ``request`` on ``backend``, calling ``emit`` after each step or cycle — or, with
    ``chunk_interval`` > 0, with the steps of that many seconds merged into one chunk (the first
    token at once, the end of the reply at once). ``cancelled`` is asked whenever a chunk goes
    out.

    ``depth_policies`` carries what an adaptive depth learned about ``backend`` from earlier
    requests and sessions (the worker keeps one per loaded model and saves it after sending
    each reply, so the write is neither in the reply's wait nor in its timings); without it
    each request starts afresh.
    """
    started = time.perf_counter()  # an image's preparation counts in the time to first token
    context = backend.info.context_length
    request, left_out = fit_history(
        request, lambda fitted: len(_token_ids(backend, fitted)), context
    )
    tokens = prompt_tokens(backend, request)
    grammar, penalties = _token_rules(backend, request, tokens)
    trimmed = left_out_note(left_out, context) if left_out else None
    policies = depth_policies or DepthPolicies(remember=False)
    choice = _choose_depth(backend, request, policies, tokens)
    seed = request.sampler.seed if request.sampler.seed is not None else secrets.randbits(63)
    rng = np.random.default_rng(seed)
    recorder = StatsRecorder(
        mode="ar" if choice.depth == 0 else str(request.accept),
        depth=choice.depth,
        prompt_tokens=len(tokens),
        adaptive=request.adaptive_depth and choice.depth > 0,
        clock=backend.cycle_clock,
        compute_seconds=lambda: backend.compute_seconds,
        started_at=started,
    )
    output = _Output(backend, request, recorder, emit, chunk_interval)
    logits = backend.prefill(
        tokens,
        with_mtp=choice.drafting,
        keep_at=last_user_message_start(backend, request, tokens),
    )
    recorder.prompt_reused_tokens = backend.last_prefix_reuse.reused_tokens
    recorder.prompt_images_encoded = backend.last_prefix_reuse.images_encoded
    recorder.prefill_done()
    last = next_token(logits, grammar, request, rng, penalties)
    look_for_cancel = output.commit((last,), logits[None])  # prefill's row is ours to keep
    try:
        step = _choose_step(backend, request, choice, (grammar, rng, penalties), recorder, output)
        while output.finish_reason is None:
            if look_for_cancel and cancelled():
                output.stop("cancelled")
                break
            room = context - backend.committed_length - 1
            if room < 0:
                output.stop("context")
                break
            committed = step(last, room)
            last = committed.tokens[-1]
            look_for_cancel = output.commit(committed.tokens, committed.rows)
    except BaseException:
        backend.reset()  # a step that failed half-way leaves a state nothing may reuse
        raise
    watch = choice.watch
    _record_estimate(recorder, choice)
    return GenerationResult(
        text="".join(output.text_parts),
        token_ids=tuple(output.token_ids),
        prompt_token_count=len(tokens),
        finish_reason=output.finish_reason,
        stats=recorder.snapshot(),
        seed=seed,
        note=_joined(trimmed, choice.note or (watch.reason if choice.depth > 0 else None)),
        kept_state_bytes=backend.kept_state_bytes,
        logprobs=tuple(output.logprobs),
    )


def _record_estimate(recorder: StatsRecorder, choice: _DepthChoice) -> None:
    """What an adaptive depth chose from, for the reply's Details (nothing for a fixed one)."""
    estimate = choice.policy.estimate() if choice.depth > 0 else None
    if estimate is not None:
        recorder.auto_plain_rate = estimate.plain
        recorder.auto_depth_rates = estimate.rates
        recorder.auto_kept_through = estimate.kept_through


def _joined(*notes: str | None) -> str | None:
    """The notes that are set, as one (None when none is)."""
    present = [note for note in notes if note]
    return " ".join(present) if present else None
