"""The scheduler runs as many of a model's requests at once as its runner says it can.

Here the runner is a real demo worker loaded for two sequences (one llama.cpp context, continuous
batching): the scheduler starts two requests together while a third waits, starts the third when
a slot frees (a cancel frees it within a step), and a cancelled waiting request never starts.
Nothing in the scheduler knows how the runner runs its sequences."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from app.engine.chat.context_choice import LoadPlan
from app.engine.runtime.chat_format.prompting import ChatMessage
from app.engine.runtime.core.backend import LoadSettings, ModelInfo
from app.engine.runtime.core.demo_model import demo_model_path
from app.engine.runtime.core.request import GenerationRequest, GenerationResult, TokenChunk
from app.engine.runtime.process.client import GenerationStream, RuntimeClient
from app.engine.runtime.sampling.sampler import SamplerSettings
from app.engine.server.core.scheduler import Job, Scheduler
from app.engine.server.models.runner import ModelRunner

pytestmark = pytest.mark.slow

SETTINGS = LoadSettings(context_length=2048, threads=1, state_cache_mib=0, sequences=2)


class TwoSequences:
    """A demo worker loaded for two sequences: two generations at once in one context."""

    def __init__(self) -> None:
        self._client = RuntimeClient(demo_model_path(), settings=SETTINGS)
        self._info = self._client.load()

    @property
    def info(self) -> ModelInfo:
        return self._info

    @property
    def plan(self) -> LoadPlan:
        raise AssertionError("the scheduler never reads the plan")

    @property
    def sequences(self) -> int:
        return self._info.sequences

    def start(self, request: GenerationRequest) -> GenerationStream:
        return self._client.start(request)

    def worker_pids(self) -> tuple[int, ...]:
        pid = self._client.worker_pid
        return (pid,) if pid is not None else ()

    def close(self) -> None:
        self._client.close()


class Lent:
    """The runner lent as the pool lends one."""

    def __init__(self, runner: ModelRunner) -> None:
        self.runner = runner
        self.leases = 0

    def acquire(self, still_needed: Callable[[], bool]) -> ModelRunner | None:
        self.leases += 1
        return self.runner

    def release(self) -> None:
        self.leases -= 1

    def wanted(self) -> bool:
        return False


def story(tokens: int) -> GenerationRequest:
    return GenerationRequest(
        messages=(ChatMessage("user", "Write a long story about a dragon."),),
        max_tokens=tokens,
        sampler=SamplerSettings(temperature=0),
        mtp_depth=0,
    )


async def _first_chunk(job: Job) -> TokenChunk:
    event = await job.events.get()
    assert isinstance(event, TokenChunk), event
    return event


async def _result(job: Job) -> GenerationResult:
    while not isinstance(event := await job.events.get(), GenerationResult):
        assert isinstance(event, TokenChunk), event
    return event


def test_two_sequences_run_at_once_and_the_third_waits_for_a_slot() -> None:
    runner = TwoSequences()
    lent = Lent(runner)
    scheduler = Scheduler(lent, queue_size=4, model="demo-mtp")
    scheduler.start()

    async def scenario() -> None:
        first, second = scheduler.submit(story(2000)), scheduler.submit(story(2000))
        both = asyncio.gather(_first_chunk(first), _first_chunk(second))
        await asyncio.wait_for(both, 60)  # both generate at once (one slot each)
        assert scheduler.running == 2
        third, gone = scheduler.submit(story(4)), scheduler.submit(story(4))
        await asyncio.sleep(0.5)
        assert scheduler.waiting == 2 and not third.started.is_set()
        assert [job.state for job in scheduler.jobs()] == ["running"] * 2 + ["waiting"] * 2
        gone.cancel()  # its client left while it waited
        assert scheduler.waiting == 1
        first.cancel()  # a slot frees: the third starts there
        assert (await _result(first)).finish_reason == "cancelled"
        assert (await _result(third)).stats.generated_tokens == 4
        assert not gone.started.is_set() and gone.events.empty()
        second.cancel()
        await _result(second)

    try:
        asyncio.run(scenario())
    finally:
        scheduler.stop()
        runner.close()
    assert lent.leases == 0, "the scheduler handed the model back once nothing ran or waited"
