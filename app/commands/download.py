"""``mtp-studio download``: the download wizard's engine, headless.

Same job as the GUI's (resumable, verified, into the Hugging Face cache by default) and recorded
in the same job history, so a download started here shows up in the app's monitor, and one that
was interrupted resumes from the byte reached when run again.
"""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from app.engine.download import CACHE, FOLDER, DownloadJob, DownloadRequest
from app.engine.download.rate import TransferRate, format_duration
from app.engine.jobs import JobContext, JobEvent, LogEvent, ProgressEvent, ResultEvent, StageEvent
from app.engine.settings import SettingsStore, app_dirs
from app.engine.store import JobSpec, JobState, JobStore, run_recorded
from app.engine.units import format_bytes, format_rate


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "download",
        help="download a repo (or some of its files), resumable and verified",
        description=(
            "Download files of a Hub repo into the Hugging Face cache (default, shared with other "
            "tools) or a plain folder. Interrupted downloads resume from the byte reached."
        ),
    )
    parser.add_argument("repo", help="owner/name on the Hub")
    parser.add_argument(
        "--include",
        action="append",
        default=[],
        metavar="PATTERN",
        help="glob of files to fetch, e.g. 'mtp.safetensors' or '*.json' (repeatable; default all)",
    )
    parser.add_argument(
        "--dest", metavar="DIR", help="a plain folder to put the files in (default: the HF cache)"
    )
    parser.add_argument(
        "--cache-dir", metavar="DIR", help="another Hugging Face cache folder (default: settings)"
    )
    parser.add_argument("--revision", default="main", help="branch, tag or commit (default main)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    settings = SettingsStore().load()
    if args.dest:
        destination, layout = args.dest, FOLDER
    else:
        destination, layout = str(args.cache_dir or settings.models_path()), CACHE
    request = DownloadRequest(
        repo_id=args.repo,
        destination=destination,
        endpoint=settings.endpoint,
        revision=args.revision,
        include=tuple(args.include),
        layout=layout,
    )
    dirs = app_dirs()
    dirs.data.mkdir(parents=True, exist_ok=True)
    store = JobStore(dirs.job_database)
    try:
        job_id = store.create(JobSpec("download", request.title, request.to_params()))
        printer = ProgressPrinter(sys.stderr)
        try:
            run_recorded(store, job_id, DownloadJob(request), JobContext(emit=printer))
        except KeyboardInterrupt:
            store.finish(
                job_id, JobState.INTERRUPTED, "stopped with Ctrl-C; run it again to resume"
            )
            raise
        print(printer.location)
    finally:
        store.close()
    return 0


class ProgressPrinter:
    """Renders job events as lines: stages, logs, and progress with speed and time left."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._rate = TransferRate()
        self._live = stream.isatty()
        self._last_percent = -1
        self.location = ""

    def __call__(self, event: JobEvent) -> None:
        if isinstance(event, ProgressEvent):
            self._progress(event)
            return
        if self._live and self._last_percent >= 0:
            self._stream.write("\n")
        self._last_percent = -1
        if isinstance(event, StageEvent):
            detail = f" {event.detail}" if event.detail else ""
            self._stream.write(f"{event.stage}:{detail}\n")
        elif isinstance(event, LogEvent):
            self._stream.write(f"  {event.message}\n")
        elif isinstance(event, ResultEvent):
            self.location = str(event.summary.get("location", ""))
            self._stream.write(
                f"done: {event.summary.get('files')} file(s), "
                f"{format_bytes(event.summary.get('downloaded_bytes', 0))} downloaded\n"
            )
        self._stream.flush()

    def _progress(self, event: ProgressEvent) -> None:
        reading = self._rate.update(event.done, event.total)
        percent = int(100 * event.done / event.total) if event.total else 0
        speed = format_rate(reading.bytes_per_second)
        left = format_duration(reading.seconds_left)
        line = (
            f"{event.stage}: {percent}% ({format_bytes(event.done)} / {format_bytes(event.total)})"
            f" {speed}, {left} left"
        )
        if self._live:
            self._stream.write(f"\r{line}\033[K")
        elif percent // 10 != self._last_percent // 10:
            self._stream.write(line + "\n")
        self._last_percent = percent
        self._stream.flush()
