"""A conversation as Markdown (to read or paste) or JSON (to process), written atomically.

Markdown keeps replies as written (they are Markdown already), with each reply's figures under
it; only what could forge the export's own sections is escaped (:mod:`.markdown_text`).
JSON holds everything stored: settings, every message with its state, stop reason and the full
statistics (recorded and derived), so an export is a complete record of the conversation. A
user message's pictures go with it in both, as the file's bytes (base64): in JSON with their
place in the text, format, size and SHA-256; in Markdown as inline ``data:`` images where they
stand, so the exported file shows them without a folder beside it.
The file is written under a temporary name and renamed, so a failed export never leaves half a
file in place of a good one. The temporary file is created exclusively (a link planted under a
guessable name cannot redirect the write), and a target that is a folder or whose name holds a
control character or passes the file system's length limit is refused before anything is
written. An existing file is replaced only when the caller says so (the GUI's save dialog has
asked), and never when it is anything but a regular file: a link, a device such as ``/dev/null``
or a pipe stays as it is.
"""

from __future__ import annotations

import base64
import errno
import json
import os
import stat
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.engine.chat.conversation import (
    ASSISTANT,
    USER,
    Conversation,
    MessageState,
    StoredMessage,
)
from app.engine.chat.figures import reply_figures
from app.engine.chat.markdown_text import block, inline
from app.engine.errors import MtpStudioError
from app.engine.safepath import plain_name_problem

EXPORT_FORMAT_VERSION = 1
MAX_NAME_BYTES = 255
"""The longest file name (in UTF-8 bytes) ext4, APFS, NTFS and most others accept."""
ROLE_HEADINGS = {USER: "User", ASSISTANT: "Assistant"}


class ExportError(MtpStudioError):
    """A conversation cannot be written to the chosen file."""


def _timestamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds")


def _state_note(message: StoredMessage) -> str | None:
    if message.state is MessageState.FAILED:
        return f"This reply failed: {message.error}"
    if message.state is MessageState.INTERRUPTED:
        return "This reply was interrupted (the app stopped while it was being written)."
    if message.state is MessageState.STREAMING:
        return "This reply was still being written when the conversation was exported."
    return None


def to_markdown(conversation: Conversation) -> str:
    settings = conversation.settings
    lines = [f"# {inline(conversation.title)}", ""]
    lines.append(
        f"*Exported from MTP Studio · started {_timestamp(conversation.summary.created_at)}*"
    )
    lines.append("")
    if settings.system_prompt:
        lines += ["## System", "", block(settings.system_prompt), ""]
    for message in conversation.messages:
        heading = ROLE_HEADINGS.get(message.role, message.role.title())
        if message.role == ASSISTANT and message.model:
            heading += f" ({message.model})"
        lines += [f"## {inline(heading)}", "", block(_markdown_text(message)), ""]
        note = _state_note(message)
        if message.stats is not None and message.role == ASSISTANT:
            figures = reply_figures(message.stats, message.finish_reason or None)
            lines += [f"> {line}  " for line in figures.lines()]
            lines.append("")
        if note is None and message.role == ASSISTANT and message.note:
            note = message.note  # e.g. a fallback, or where a remote reply came from
        if note is not None:
            lines += [f"> {inline(note)}", ""]
    return "\n".join(lines).rstrip() + "\n"


def _markdown_text(message: StoredMessage) -> str:
    """The message's text with each picture where it stands, as an inline image."""
    pieces, start = [], 0
    for number, placed in enumerate(message.images, 1):
        data = base64.b64encode(placed.image.data).decode("ascii")
        image = f"![picture {number}](data:{placed.image.media_type};base64,{data})"
        pieces += [message.content[start : placed.offset], f"\n\n{image}\n\n"]
        start = placed.offset
    return "".join([*pieces, message.content[start:]]).strip("\n")


def to_json_document(conversation: Conversation) -> dict[str, Any]:
    return {
        "format": "mtp-studio-conversation",
        "version": EXPORT_FORMAT_VERSION,
        "title": conversation.title,
        "created_at": _timestamp(conversation.summary.created_at),
        "updated_at": _timestamp(conversation.summary.updated_at),
        "settings": conversation.settings.to_dict(),
        "messages": [_message_document(message) for message in conversation.messages],
    }


def _message_document(message: StoredMessage) -> dict[str, Any]:
    document: dict[str, Any] = {
        "role": message.role,
        "content": message.content,
        "state": message.state.value,
        "created_at": _timestamp(message.created_at),
    }
    if message.images:
        document["images"] = [
            {
                "offset": placed.offset,
                "media_type": placed.image.media_type,
                "width": placed.image.width,
                "height": placed.image.height,
                "sha256": placed.image.sha256,
                "data": base64.b64encode(placed.image.data).decode("ascii"),
            }
            for placed in message.images
        ]
    if message.role == ASSISTANT:
        document.update(
            model=message.model,
            finish_reason=message.finish_reason or None,
            seed=message.seed,
            stats=message.stats.to_dict() if message.stats is not None else None,
            note=message.note or None,
            error=message.error or None,
        )
    return document


def to_json(conversation: Conversation) -> str:
    return json.dumps(to_json_document(conversation), indent=2, ensure_ascii=False) + "\n"


def export_conversation(conversation: Conversation, path: Path, replace: bool = False) -> Path:
    """Write ``conversation`` to ``path``: JSON for a ``.json`` name, Markdown otherwise.

    ``replace``: an existing regular file at ``path`` may be replaced (else it is an error).
    """
    path = Path(path)
    _check_target(path, replace)
    text = to_json(conversation) if path.suffix.lower() == ".json" else to_markdown(conversation)
    temporary: Path | None = None
    try:
        handle, name = tempfile.mkstemp(prefix=".export-", suffix=".partial", dir=path.parent)
        temporary = Path(name)
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(temporary, path)
    except OSError as exc:
        if temporary is not None:
            temporary.unlink(missing_ok=True)
        if exc.errno == errno.ENAMETOOLONG:
            raise ExportError(
                f"cannot export to {path}: the path is longer than this file system allows; "
                "choose a shorter name or folder"
            ) from None
        raise ExportError(
            f"cannot write {path} ({exc.strerror or exc}); choose a folder you can write to"
        ) from None
    return path


def _check_target(path: Path, replace: bool) -> None:
    if (problem := plain_name_problem(path.name, max_name_bytes=None)) is not None:
        raise ExportError(f"cannot export to {str(path)!r}: {problem}; choose another file name")
    if len(path.name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        raise ExportError(
            f"cannot export to a file name of {len(path.name)} characters ({path.name[:40]}…): "
            f"file systems allow {MAX_NAME_BYTES} bytes; choose a shorter name"
        )
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise ExportError(
            f"cannot export to {path} ({exc.strerror or exc}); choose another file name"
        ) from None
    if stat.S_ISDIR(mode):
        raise ExportError(f"{path} is a folder; choose a file name inside it, e.g. chat.md")
    if not stat.S_ISREG(mode):
        kind = "a link" if stat.S_ISLNK(mode) else "a device, pipe or socket"
        raise ExportError(
            f"{path} is {kind}, not a regular file, and is never replaced by an export; "
            "choose another file name"
        )
    if not replace:
        raise ExportError(
            f"{path} already exists and is not replaced without confirmation; choose another "
            "name, or confirm replacing it"
        )
