"""What a finished job's result says, in one line, and which model it made ready to chat with.

A job's log ends with its result; a job made of steps (a Get downloads, then grafts) records a
result for each, and each reads for what it is — "downloaded 3 files (1.2 GB) to …", "grafted the
MTP head into …", "ready to chat: …" — so one outcome is never logged as "done" twice. A job whose
result is a model that runs (a Get, a graft, a conversion for MLX) offers Chat on it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.engine.convert.job import CONVERT_KIND
from app.engine.graft.download_job import DOWNLOAD_GRAFT_KIND
from app.engine.graft.job import GRAFT_KIND
from app.engine.hub.get import GET_KIND
from app.engine.units import format_bytes

RESULT_LINKS = ("commit_url", "location", "repo_url")


def result_line(summary: dict[str, Any]) -> str:
    """A result in one line: what was done and where to look."""
    if summary.get("ready_path"):
        note = f" ({summary['note']})" if summary.get("note") else ""
        return f"ready to chat: {summary['ready_path']}{note}"
    if summary.get("output") and summary.get("head_blocks") is not None:
        return f"grafted {summary['head_blocks']} MTP block(s) into {summary['output']}"
    if summary.get("grafted"):
        return f"downloaded and grafted: {', '.join(summary['grafted'])}"
    if "downloaded_bytes" in summary:
        files = summary.get("files", 0)
        fetched = format_bytes(int(summary["downloaded_bytes"]))
        return f"downloaded {files} file(s), {fetched} fetched, into {summary.get('location')}"
    outcome = summary.get("outcome", "done")
    where = next((str(summary[key]) for key in RESULT_LINKS if summary.get(key)), "")
    return f"{outcome} — {where}" if where else str(outcome)


def chat_model(kind: str, result: dict[str, Any] | None) -> Path | None:
    """The model a finished job of ``kind`` made ready to chat with, if it is on disk."""
    if not result:
        return None
    found: object = None
    if kind == GET_KIND:
        found = result.get("ready_path")
    elif kind == GRAFT_KIND:
        found = result.get("output")
    elif kind == CONVERT_KIND:
        found = result.get("location")
    elif kind == DOWNLOAD_GRAFT_KIND:
        grafted = result.get("grafted") or []
        found = grafted[0] if grafted else None
    if not isinstance(found, str) or not found:
        return None
    path = Path(found)
    return path if path.exists() else None
