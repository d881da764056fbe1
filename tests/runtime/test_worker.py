"""The worker process as the CLI and chat window use it: stream, cancel, survive a crash."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.engine.errors import RuntimeBackendError, UnrunnableBuildError
from app.engine.runtime.backends.llama_cpp.backend import LlamaCppBackend
from app.engine.runtime.backends.llama_cpp.cpu_backends import installed_folder
from app.engine.runtime.chat_format.prompting import ChatMessage
from app.engine.runtime.core.backend import LoadSettings
from app.engine.runtime.core.request import GenerationRequest
from app.engine.runtime.process.client import RuntimeClient
from app.engine.runtime.sampling.sampler import SamplerSettings
from app.engine.runtime.speculative.generation import generate
from tests.runtime.illegal_instruction import SIGILL, expected_advice, no_core_files

SETTINGS = LoadSettings(threads=1, context_length=1024)
LONG = GenerationRequest(prompt="Keep going", max_tokens=1000, mtp_depth=2)


@pytest.fixture
def client(tiny_models: dict[str, Path]) -> Iterator[RuntimeClient]:
    with RuntimeClient(tiny_models["mtp"], settings=SETTINGS) as running:
        yield running


def test_tokens_and_statistics_stream_from_the_worker(
    client: RuntimeClient, backend: LlamaCppBackend
) -> None:
    request = GenerationRequest(messages=(ChatMessage("user", "Tell me a story"),), max_tokens=30)
    info = client.load()
    assert info.mtp_available and info.path.name == "tiny-mtp.gguf"
    chunks = []
    result = client.generate(request, on_chunk=chunks.append)
    assert len(chunks) > 1
    assert [chunk.stats.generated_tokens for chunk in chunks] == sorted(
        chunk.stats.generated_tokens for chunk in chunks
    )
    assert chunks[-1].stats.cycles == result.stats.cycles > 0
    in_process = generate(backend, request, emit=lambda _c: None, cancelled=lambda: False)
    assert result.token_ids == in_process.token_ids
    assert result.text == in_process.text


def test_a_cancelled_generation_stops_early_and_the_worker_stays(client: RuntimeClient) -> None:
    stream = client.start(LONG)
    pid = client.worker_pid
    for _chunk in stream:
        stream.cancel()
    assert stream.result is not None
    assert stream.result.finish_reason == "cancelled"
    assert len(stream.result.token_ids) < LONG.max_tokens
    after = client.generate(GenerationRequest(prompt="Again", max_tokens=5))
    assert len(after.token_ids) == 5 and client.worker_pid == pid


@pytest.mark.parametrize("crash", [signal.SIGABRT, signal.SIGKILL])
@pytest.mark.slow
def test_a_worker_dying_mid_stream_is_a_clear_error_and_the_next_request_works(
    client: RuntimeClient, crash: signal.Signals
) -> None:
    stream = client.start(LONG)
    first_pid = client.worker_pid
    assert first_pid is not None
    with pytest.raises(RuntimeBackendError) as failure:
        for index, _chunk in enumerate(stream):
            if index == 2:
                os.kill(first_pid, crash)
    message = str(failure.value)
    assert "stopped unexpectedly while generating with tiny-mtp.gguf" in message
    assert crash.name in message and "next request starts a fresh worker" in message
    after = client.generate(GenerationRequest(prompt="Recovered", max_tokens=5))
    assert len(after.token_ids) == 5
    assert client.worker_pid not in (None, first_pid)


def test_a_worker_killed_by_sigill_says_how_to_get_a_build_that_runs_and_stays_down(
    client: RuntimeClient,
) -> None:
    stream = client.start(LONG)
    first_pid = client.worker_pid
    assert first_pid is not None
    with no_core_files(), pytest.raises(UnrunnableBuildError) as failure:
        for index, _chunk in enumerate(stream):
            if index == 2:
                os.kill(first_pid, SIGILL)
    message = str(failure.value)
    assert message.startswith(
        "the llama.cpp worker was killed by SIGILL (an illegal instruction) while generating "
        "with tiny-mtp.gguf: llama.cpp's CPU "
    )
    assert str(installed_folder()) in message and expected_advice() in message
    assert "next request starts a fresh worker" not in message
    # Every worker would die the same way: no new one is started, the same advice is repeated.
    with pytest.raises(UnrunnableBuildError) as again:
        client.start(GenerationRequest(prompt="Again", max_tokens=3))
    assert str(again.value) == message
    assert client.worker_pid is None


@pytest.mark.slow
def test_a_stuck_worker_is_stopped_after_the_cancel_grace_period(
    tiny_models: dict[str, Path],
) -> None:
    with RuntimeClient(tiny_models["mtp"], settings=SETTINGS, cancel_grace_seconds=0.5) as client:
        stream = client.start(LONG)
        stuck_pid = client.worker_pid
        assert stuck_pid is not None
        for _chunk in stream:
            os.kill(stuck_pid, signal.SIGSTOP)  # stands in for a native call that never returns
            stream.cancel()
        result = stream.result
        assert result is not None and result.finish_reason == "cancelled"
        assert result.note is not None and "did not stop in time" in result.note
        assert len(result.token_ids) > 0
        after = client.generate(GenerationRequest(prompt="Fresh worker", max_tokens=3))
        assert len(after.token_ids) == 3 and client.worker_pid != stuck_pid


def test_a_second_generation_while_one_runs_is_refused(client: RuntimeClient) -> None:
    stream = client.start(LONG)
    with pytest.raises(RuntimeBackendError, match="already running"):
        client.start(LONG)
    stream.cancel()
    assert stream.wait().finish_reason == "cancelled"


def test_bad_requests_come_back_as_errors_and_the_worker_stays(client: RuntimeClient) -> None:
    client.load()
    pid = client.worker_pid
    with pytest.raises(RuntimeBackendError, match="context window"):
        client.generate(GenerationRequest(prompt="word " * 2000, max_tokens=4))
    with pytest.raises(RuntimeBackendError, match="MTP depth 6 exceeds the depth 4"):
        client.generate(GenerationRequest(prompt="deep", mtp_depth=6))
    assert len(client.generate(GenerationRequest(prompt="fine", max_tokens=3)).token_ids) == 3
    assert client.worker_pid == pid


@pytest.mark.slow
def test_a_model_llama_cpp_cannot_load_fails_cleanly(
    tiny_models: dict[str, Path], tmp_path: Path
) -> None:
    broken = tmp_path / "broken.gguf"
    data = bytearray(tiny_models["mtp"].read_bytes())
    data[-4096:] = b"\0" * 4096  # header intact, so the check before loading passes
    broken.write_bytes(bytes(data[: len(data) - 1024]))
    with pytest.raises(RuntimeBackendError, match=r"broken\.gguf"):
        RuntimeClient(broken, settings=SETTINGS).load()
    with RuntimeClient(tiny_models["mtp"], settings=SETTINGS) as healthy:
        assert len(healthy.generate(GenerationRequest(prompt="ok", max_tokens=2)).token_ids) == 2


def test_the_reported_seed_reproduces_a_sampled_answer(client: RuntimeClient) -> None:
    sampled = SamplerSettings(temperature=0.9, top_k=50)
    request = GenerationRequest(prompt="Surprise me", max_tokens=40, sampler=sampled)
    first = client.generate(request)
    again = client.generate(
        GenerationRequest(
            prompt="Surprise me",
            max_tokens=40,
            sampler=SamplerSettings(temperature=0.9, top_k=50, seed=first.seed),
        )
    )
    other = client.generate(request)
    assert again.token_ids == first.token_ids
    assert other.seed != first.seed and other.token_ids != first.token_ids
