"""Ranged fetching against a real HTTP server: resume, drops, servers that ignore Range, pause."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from app.engine.download.fetch import FetchCallbacks, FetchPolicy, fetch_to_partial
from app.engine.download.pause import PauseToken
from app.engine.errors import DownloadError, JobCancelled
from app.engine.jobs import CancelToken
from tests.download.rangeserver import RangeServer

FAST_RETRY = FetchPolicy(first_wait_seconds=0.01, max_wait_seconds=0.05)
CONTENT = os.urandom(3 * 1024 * 1024 + 123)


class Recorder:
    """Collects what the fetch reports, as a front end would."""

    def __init__(self, cancel_after: int | None = None, cancel: CancelToken | None = None) -> None:
        self.received = 0
        self.rewound = 0
        self.lines: list[str] = []
        self.pauses: list[bool] = []
        self.paused_event = threading.Event()
        self._cancel_after = cancel_after
        self._cancel = cancel

    def on_bytes(self, count: int) -> None:
        self.received += count
        if self._cancel_after is not None and self.received >= self._cancel_after:
            assert self._cancel is not None
            self._cancel.cancel()
            raise JobCancelled("cancelled by the user")

    def on_pause_change(self, paused: bool) -> None:
        self.pauses.append(paused)
        if paused:
            self.paused_event.set()

    def callbacks(self) -> FetchCallbacks:
        return FetchCallbacks(
            on_bytes=self.on_bytes,
            on_rewind=lambda count: setattr(self, "rewound", self.rewound + count),
            log=self.lines.append,
            on_pause_change=self.on_pause_change,
        )


def fetch(server: RangeServer, partial: Path, recorder: Recorder, **kwargs) -> None:
    fetch_to_partial(
        server.url,
        partial,
        len(CONTENT),
        {},
        kwargs.get("cancel", CancelToken()),
        kwargs.get("pause", PauseToken()),
        recorder.callbacks(),
        kwargs.get("policy", FAST_RETRY),
    )


def test_fetches_a_whole_file(tmp_path: Path) -> None:
    partial = tmp_path / "blob.incomplete"
    with RangeServer(CONTENT) as server:
        fetch(server, partial, Recorder())
    assert partial.read_bytes() == CONTENT
    assert server.served.ranges == ["bytes=0-"]


def test_resumes_from_the_bytes_already_on_disk(tmp_path: Path) -> None:
    partial = tmp_path / "blob.incomplete"
    partial.write_bytes(CONTENT[:1_000_000])
    with RangeServer(CONTENT) as server:
        recorder = Recorder()
        fetch(server, partial, recorder)
    assert partial.read_bytes() == CONTENT
    assert server.served.ranges == ["bytes=1000000-"]
    assert server.served.bytes_sent == len(CONTENT) - 1_000_000
    assert recorder.received == len(CONTENT) - 1_000_000


def test_a_dropped_connection_resumes_where_it_stopped(tmp_path: Path) -> None:
    partial = tmp_path / "blob.incomplete"
    with RangeServer(CONTENT) as server:
        server.faults.drop_after_bytes = 700_000
        server.faults.drops_left = 2
        recorder = Recorder()
        fetch(server, partial, recorder)
    assert partial.read_bytes() == CONTENT
    starts = [int(asked.removeprefix("bytes=").rstrip("-")) for asked in server.served.ranges]
    # Each retry starts where the bytes on disk end (a drop may lose what was still in flight).
    assert len(starts) == 3
    assert starts[0] == 0
    assert 600_000 < starts[1] <= 700_000
    assert starts[1] + 600_000 < starts[2] <= starts[1] + 700_000
    assert server.served.bytes_sent < len(CONTENT) + 2 * 100_000
    assert sum("connection problem" in line for line in recorder.lines) == 2


def test_a_server_ignoring_range_restarts_the_file_instead_of_appending(tmp_path: Path) -> None:
    partial = tmp_path / "blob.incomplete"
    partial.write_bytes(CONTENT[:500_000])
    with RangeServer(CONTENT) as server:
        server.faults.ignore_range = True
        recorder = Recorder()
        fetch(server, partial, recorder)
    assert partial.read_bytes() == CONTENT
    assert recorder.rewound == 500_000
    assert any("ignored the resume request" in line for line in recorder.lines)


def test_server_errors_are_retried(tmp_path: Path) -> None:
    partial = tmp_path / "blob.incomplete"
    with RangeServer(CONTENT) as server:
        server.faults.errors_left = 3
        fetch(server, partial, Recorder())
    assert partial.read_bytes() == CONTENT
    assert len(server.served.ranges) == 4


def test_gives_up_with_a_message_and_keeps_the_partial_file(tmp_path: Path) -> None:
    partial = tmp_path / "blob.incomplete"
    partial.write_bytes(CONTENT[:200_000])
    with RangeServer(CONTENT) as server:
        server.faults.errors_left = 100
        with pytest.raises(DownloadError) as caught:
            fetch(server, partial, Recorder())
    message = str(caught.value)
    assert "after 6 failed attempts (HTTP 503)" in message
    assert "200.0 kB of 3.1 MB are kept" in message
    assert "run the download again to resume" in message
    assert partial.read_bytes() == CONTENT[:200_000]


def test_a_cancelled_fetch_keeps_its_bytes_and_the_next_run_continues(tmp_path: Path) -> None:
    partial = tmp_path / "blob.incomplete"
    with RangeServer(CONTENT) as server:
        cancel = CancelToken()
        with pytest.raises(JobCancelled):
            fetch(server, partial, Recorder(cancel_after=1_000_000, cancel=cancel), cancel=cancel)
        kept = partial.stat().st_size
        assert 1_000_000 <= kept < len(CONTENT)
        fetch(server, partial, Recorder())
    assert partial.read_bytes() == CONTENT
    assert server.served.ranges[-1] == f"bytes={kept}-"


@pytest.mark.slow
def test_pause_holds_no_connection_and_resume_continues(tmp_path: Path) -> None:
    partial = tmp_path / "blob.incomplete"
    pause = PauseToken()
    recorder = Recorder()
    with RangeServer(CONTENT, chunk=64 * 1024) as server:
        server.faults.seconds_per_chunk = 0.01
        worker = threading.Thread(
            target=fetch, args=(server, partial, recorder), kwargs={"pause": pause}
        )
        worker.start()
        while recorder.received < 500_000:
            threading.Event().wait(0.01)
        pause.pause()
        assert recorder.paused_event.wait(10)
        size_when_paused = partial.stat().st_size
        requests_when_paused = len(server.served.ranges)
        threading.Event().wait(0.5)
        assert partial.stat().st_size == size_when_paused
        pause.resume()
        worker.join(30)
    assert not worker.is_alive()
    assert partial.read_bytes() == CONTENT
    assert recorder.pauses == [True, False]
    assert server.served.ranges[requests_when_paused] == f"bytes={size_when_paused}-"
