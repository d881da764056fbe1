"""The multi-turn chat benchmark: time to first token per turn as a conversation grows.

A chat client sends the whole conversation with every turn, so without prefix reuse each turn
prefills everything said so far and the wait before the first token grows with the history.
This benchmark plays such a conversation: a long first user message (a fixed list of small
coding requirements, sized to the asked history), then short fixed follow-ups, each turn
appending the model's actual reply and the next message. Per turn it records the prompt tokens,
how many were reused from kept state and how many computed, and the time to first token.

Beside it, two references, each on the same conversation (our replies' text in every history):

* cold — every turn computed from scratch: the same prompts replayed on a second worker loaded
  with kept states off (``state_cache_mib`` 0), each first message prefixed with its turn
  number so that not even the previous turn's live state matches. What reuse buys is the
  difference.
* llama-server (optional) — llama.cpp's own server on the same GGUF, context and threads, with
  its prompt cache on, sent each turn right after ours; its ``timings`` say how many prompt
  tokens came from its cache (``cache_n``), how many it computed (``prompt_n``) and in how long
  (``prompt_ms``).

Nothing here is random or fetched: the texts are fixed and sampling is seeded. Sampling is greedy
by default, so llama-server writes the replies ours wrote and its cache holds the same
conversation; above temperature 0 its cache holds its own replies and it computes ours anew.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from app.engine.errors import RuntimeBackendError
from app.engine.runtime.bench.decode_bench import PROMPTS
from app.engine.runtime.bench.llama_server import LlamaServer, PromptTimings
from app.engine.runtime.chat_format.prompting import ChatMessage
from app.engine.runtime.core.request import GenerationRequest, GenerationResult, TokenChunk
from app.engine.runtime.process.client import RuntimeClient
from app.engine.runtime.sampling.acceptance import AcceptMode
from app.engine.runtime.sampling.sampler import SamplerSettings

FOLLOW_UPS: tuple[str, ...] = (
    "Good. Now do requirement 2 the same way.",
    "Add type hints and a short docstring to both.",
    "Write one pytest test for each of them.",
    "What happens with empty input? Fix it if needed.",
    "Now requirement 3, in the same style.",
    "Summarise what we have so far in three lines.",
    "Make the names more descriptive.",
    "Next, requirement 4.",
)
FIRST_MESSAGE_HEAD = "I am writing a small Python utility library. Here are its requirements:\n"
FIRST_MESSAGE_TAIL = "\nStart with requirement 1: write the function and explain it briefly."
FOLLOW_UP_TOKENS = 24
"""Tokens a turn adds besides the reply (a follow-up and the template's markers), roughly: used
only to size the first message so the last prompt comes out near the asked history."""
CALIBRATION_FROM, CALIBRATION_REQUIREMENTS = 10, 8
"""The first message's requirements measured for its size (two-digit numbers, like most)."""
COLD_METHOD = (
    "cold = every turn replayed on a second worker with kept states off (state cache 0 MiB), "
    "its first message prefixed with the turn number so not even the previous turn's live "
    "state matches: each prompt computed from scratch"
)

Progress = Callable[[str], None]


def requirement(index: int) -> str:
    """Requirement ``index`` (0-based) of the first message: one of the decode benchmark's
    fixed tasks, numbered and with its own name so no two lines are the same."""
    task = PROMPTS[index % len(PROMPTS)]
    return (
        f"{index + 1}. {task} Name it task_{index + 1}, document its arguments, and raise "
        "ValueError with a clear message on bad input."
    )


def first_message(requirements: int) -> str:
    return _listing(range(requirements))


def _listing(indexes: Iterable[int]) -> str:
    lines = "\n".join(requirement(index) for index in indexes)
    return f"{FIRST_MESSAGE_HEAD}{lines}{FIRST_MESSAGE_TAIL}"


@dataclasses.dataclass(frozen=True)
class PromptFigures:
    """How one request took in its prompt and how long its first token took: ``ttft_seconds``
    the worker's figure (from the tokenized prompt: prefill, first sample),
    ``client_ttft_seconds`` from the caller's request to its first streamed chunk (template,
    tokenizing and the process hop included: what a chat window waits)."""

    prompt_tokens: int
    reused_tokens: int
    computed_tokens: int
    ttft_seconds: float
    client_ttft_seconds: float
    prefill_seconds: float
    reply_tokens: int


def measure_prompt(
    client: RuntimeClient, request: GenerationRequest
) -> tuple[GenerationResult, PromptFigures]:
    """Run ``request``, timing its first chunk as the caller receives it."""
    first_chunk: list[float] = []
    started = time.perf_counter()

    def on_chunk(_chunk: TokenChunk) -> None:
        if not first_chunk:
            first_chunk.append(time.perf_counter() - started)

    result = client.generate(request, on_chunk)
    stats = result.stats
    figures = PromptFigures(
        prompt_tokens=result.prompt_token_count,
        reused_tokens=stats.prompt_reused_tokens,
        computed_tokens=stats.prompt_computed_tokens,
        ttft_seconds=stats.ttft_seconds,
        client_ttft_seconds=first_chunk[0] if first_chunk else 0.0,
        prefill_seconds=stats.prefill_seconds,
        reply_tokens=stats.generated_tokens,
    )
    return result, figures


@dataclasses.dataclass(frozen=True)
class TurnFigures:
    """One turn: ours with kept state, ours cold (from scratch), and llama-server's."""

    turn: int
    ours: PromptFigures
    cold: PromptFigures | None = None
    server: PromptTimings | None = None


@dataclasses.dataclass(frozen=True)
class ChatBenchmark:
    model: str
    backend: str
    depth: str
    threads: int
    context_length: int
    max_tokens: int
    temperature: float
    history_tokens: int
    turns: tuple[TurnFigures, ...]
    kept_state_bytes: int
    """Memory the backend keeps for later prompts after the last turn (checkpoints, saved
    conversations; the live state is not counted)."""
    server_label: str | None = None

    @property
    def has_cold(self) -> bool:
        return all(turn.cold is not None for turn in self.turns)

    @property
    def median_ttft(self) -> float:
        """Median time to first token of turns 2..N, ours with kept state."""
        return _median([turn.ours.ttft_seconds for turn in self.turns[1:]])

    @property
    def median_client_ttft(self) -> float:
        """Median of turns 2..N of the time to the first chunk as the caller receives it."""
        return _median([turn.ours.client_ttft_seconds for turn in self.turns[1:]])

    @property
    def median_server_first_token(self) -> float:
        """Median of turns 2..N of llama-server's first streamed event as a client sees it."""
        return _median([t.server.first_token_seconds for t in self.turns[1:] if t.server])

    @property
    def median_cold_ttft(self) -> float:
        return _median([turn.cold.ttft_seconds for turn in self.turns[1:] if turn.cold])

    @property
    def median_server_prompt(self) -> float:
        """Median of llama-server's prompt time over turns 2..N."""
        return _median([turn.server.prompt_seconds for turn in self.turns[1:] if turn.server])

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["turns"] = [
            {
                "turn": turn.turn,
                "ours": dataclasses.asdict(turn.ours),
                "cold": dataclasses.asdict(turn.cold) if turn.cold else None,
                "llama_server": (
                    {**dataclasses.asdict(turn.server), "prompt_tokens": turn.server.prompt_tokens}
                    if turn.server
                    else None
                ),
            }
            for turn in self.turns
        ]
        server = self.server_label is not None
        data["median_ttft_turns_2_on"] = {
            "ours": self.median_ttft,
            "ours_client": self.median_client_ttft,
            "cold": self.median_cold_ttft if self.has_cold else None,
            "llama_server_prompt": self.median_server_prompt if server else None,
            "llama_server_client": self.median_server_first_token if server else None,
        }
        data["cold_method"] = COLD_METHOD if self.has_cold else None
        return data


def _median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else 0.0


@dataclasses.dataclass(frozen=True)
class ChatBenchSettings:
    """What every request of the benchmark asks for."""

    turns: int = 6
    history_tokens: int = 2000
    max_tokens: int = 32
    mtp_depth: int = 0
    adaptive_depth: bool = False
    temperature: float = 0.0
    top_k: int = 20
    top_p: float = 0.95
    seed: int = 0

    def __post_init__(self) -> None:
        if self.turns < 1:
            raise RuntimeBackendError(f"--turns {self.turns} is invalid: use 1 or more")
        if self.history_tokens < 1:
            raise RuntimeBackendError(
                f"--history-tokens {self.history_tokens} is invalid: use 1 or more"
            )

    def request(self, messages: Sequence[ChatMessage], turn: int) -> GenerationRequest:
        return GenerationRequest(
            messages=tuple(messages),
            max_tokens=self.max_tokens,
            sampler=self.sampler(turn),
            mtp_depth=self.mtp_depth,
            accept=AcceptMode.LEVIATHAN_CHEN,
            adaptive_depth=self.adaptive_depth,
        )

    def sampler(self, turn: int) -> SamplerSettings:
        return SamplerSettings(
            temperature=self.temperature, top_k=self.top_k, top_p=self.top_p, seed=self.seed + turn
        )


def run_chat_benchmark(
    client: RuntimeClient,
    settings: ChatBenchSettings,
    *,
    cold_client: RuntimeClient | None = None,
    llama_server: LlamaServer | None = None,
    threads: int = 0,
    progress: Progress = lambda _message: None,
) -> ChatBenchmark:
    """Play the conversation on ``client`` (and ``llama_server``, turn by turn), then replay
    its prompts on ``cold_client`` — which must be loaded with kept states off — if given.
    ``threads`` is only reported (the clients were loaded with it)."""
    info = client.load()
    _check_room(settings, info.context_length, [])
    progress("warm-up and sizing the first message")
    requirements = _requirements_for(client, settings, llama_server)
    messages = [ChatMessage("user", first_message(requirements))]
    prompts: list[tuple[ChatMessage, ...]] = []
    ours: list[PromptFigures] = []
    servers: list[PromptTimings] = []
    result: GenerationResult | None = None
    for turn in range(1, settings.turns + 1):
        if turn > 1:
            messages += [
                ChatMessage("assistant", result.text if result else ""),
                ChatMessage("user", FOLLOW_UPS[(turn - 2) % len(FOLLOW_UPS)]),
            ]
            _check_room(settings, info.context_length, ours)
        progress(f"turn {turn}/{settings.turns}")
        prompts.append(tuple(messages))
        result, figures = measure_prompt(client, settings.request(messages, turn))
        ours.append(figures)
        if llama_server is not None:
            sampler = settings.sampler(turn)
            servers.append(llama_server.prompt_timings(messages, sampler, settings.max_tokens))
    assert result is not None
    cold = _cold(cold_client, settings, prompts, progress) if cold_client is not None else None
    return ChatBenchmark(
        model=str(info.path),
        backend=info.backend,
        depth=_depth_label(settings),
        threads=threads,
        context_length=info.context_length,
        max_tokens=settings.max_tokens,
        temperature=settings.temperature,
        history_tokens=settings.history_tokens,
        turns=tuple(
            TurnFigures(
                turn=index + 1,
                ours=figures,
                cold=cold[index] if cold else None,
                server=servers[index] if servers else None,
            )
            for index, figures in enumerate(ours)
        ),
        kept_state_bytes=result.kept_state_bytes,
        server_label=llama_server.label if llama_server is not None else None,
    )


def _depth_label(settings: ChatBenchSettings) -> str:
    if settings.mtp_depth == 0:
        return "plain decoding"
    if settings.adaptive_depth:
        return f"MTP depth auto (0–{settings.mtp_depth})"
    return f"MTP depth {settings.mtp_depth}"


def _requirements_for(
    client: RuntimeClient, settings: ChatBenchSettings, llama_server: LlamaServer | None
) -> int:
    """How many requirements the first message lists so the last turn's prompt is about
    ``history_tokens``: two one-token requests measure the message without requirements and
    the tokens per requirement. They are also the warm-up, and start differently from the
    conversation so it reuses nothing of them beyond the template's first tokens."""
    bare = client.generate(_warm_up(settings, f"Warm-up. {first_message(0)}")).prompt_token_count
    listed = _listing(range(CALIBRATION_FROM, CALIBRATION_FROM + CALIBRATION_REQUIREMENTS))
    probe = _warm_up(settings, f"Warm-up. {listed}")
    with_list = client.generate(probe).prompt_token_count
    if llama_server is not None:
        llama_server.prompt_timings(probe.messages, probe.sampler, 1)
    per_requirement = max((with_list - bare) / CALIBRATION_REQUIREMENTS, 1.0)
    later_turns = (settings.turns - 1) * (settings.max_tokens + FOLLOW_UP_TOKENS)
    first_tokens = settings.history_tokens - later_turns - bare
    return max(1, round(first_tokens / per_requirement))


def _warm_up(settings: ChatBenchSettings, text: str) -> GenerationRequest:
    """A one-token request that shares nothing with the conversation but the template's start."""
    return dataclasses.replace(settings.request([ChatMessage("user", text)], 0), max_tokens=1)


def _check_room(
    settings: ChatBenchSettings, context_length: int, done: Sequence[PromptFigures]
) -> None:
    """Stop with a clear error before a turn that cannot fit the context."""
    if done:
        last = done[-1]
        estimate = last.prompt_tokens + last.reply_tokens + FOLLOW_UP_TOKENS + settings.max_tokens
    else:
        estimate = settings.history_tokens + settings.max_tokens
    if estimate > context_length:
        raise RuntimeBackendError(
            f"turn {len(done) + 1} would need about {estimate} tokens but the context holds "
            f"{context_length}; lower --history-tokens, --turns or --max-tokens, or raise --ctx"
        )


def _cold(
    client: RuntimeClient,
    settings: ChatBenchSettings,
    prompts: Sequence[tuple[ChatMessage, ...]],
    progress: Progress,
) -> list[PromptFigures]:
    """Each turn's prompt computed from scratch (see :data:`COLD_METHOD`)."""
    client.load()
    progress("cold: warm-up")
    client.generate(_warm_up(settings, "Warm-up."))
    figures = []
    for turn, messages in enumerate(prompts, start=1):
        progress(f"cold: turn {turn}/{len(prompts)}")
        first, *rest = messages
        marked = [ChatMessage(first.role, f"({turn}) {first.content}"), *rest]
        figures.append(measure_prompt(client, settings.request(marked, turn))[1])
    return figures
