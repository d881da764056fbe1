"""Export writes what the conversation holds: every message, its state, and each reply's figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.engine.chat.conversation import ChatSettings, Conversation, reply_request
from app.engine.chat.export import ExportError, export_conversation
from app.engine.chat.history import HistoryStore
from app.engine.runtime.core.backend import LoadSettings
from app.engine.runtime.core.request import GenerationResult
from app.engine.runtime.process.client import RuntimeClient
from app.engine.terminal import printable


@pytest.fixture(scope="module")
def conversation(tmp_path_factory: pytest.TempPathFactory, tiny_gguf: Path) -> Conversation:
    store = HistoryStore(tmp_path_factory.mktemp("export") / "chat.sqlite3")
    settings = ChatSettings(
        system_prompt="You write Python.", temperature=0.0, max_tokens=48, mtp_depth=3
    )
    conversation_id = store.create_conversation("Lines in a file", settings)
    store.add_user_message(conversation_id, "Return the number of lines in a text file.")
    reply = store.start_reply(conversation_id, tiny_gguf.name)
    request = reply_request(settings, store.conversation(conversation_id).messages)
    with RuntimeClient(tiny_gguf, settings=LoadSettings(threads=1, context_length=1024)) as client:
        result: GenerationResult = client.generate(request)
    store.finish_reply(reply.id, result)
    store.add_user_message(conversation_id, "And count words too?")
    failed = store.start_reply(conversation_id, tiny_gguf.name)
    store.fail_reply(failed.id, "def count", "the worker stopped unexpectedly", None)
    loaded = store.conversation(conversation_id)
    store.close()
    return loaded


def test_json_export_holds_every_message_and_the_full_statistics(
    conversation: Conversation, tmp_path: Path
) -> None:
    path = export_conversation(conversation, tmp_path / "chat.json")
    document = json.loads(path.read_text(encoding="utf-8"))
    assert document["title"] == "Lines in a file"
    assert document["settings"]["system_prompt"] == "You write Python."
    assert [(m["role"], m["content"], m["state"]) for m in document["messages"]] == [
        (m.role, m.content, m.state.value) for m in conversation.messages
    ]
    reply = conversation.messages[1]
    assert reply.stats is not None
    exported = document["messages"][1]
    assert exported["stats"] == json.loads(json.dumps(reply.stats.to_dict()))
    assert exported["stats"]["acceptance_by_depth"] == list(reply.stats.acceptance_by_depth)
    assert exported["finish_reason"] == reply.finish_reason
    assert reply.seed is not None and exported["seed"] == reply.seed
    assert document["messages"][3]["error"] == "the worker stopped unexpectedly"


def test_markdown_export_reads_like_the_conversation(
    conversation: Conversation, tmp_path: Path
) -> None:
    text = export_conversation(conversation, tmp_path / "chat.md").read_bytes().decode("utf-8")
    assert text.startswith("# Lines in a file\n")
    assert "## System\n\nYou write Python.\n" in text
    unescaped = text.replace("\n\\", "\n")  # a line that could open a section starts with \\
    for message in conversation.messages:  # control characters (a tiny model's) as escapes
        assert printable(message.content, multiline=True) in unescaped
    assert text.count("## User") == 2 and text.count("## Assistant (tiny-mtp.gguf)") == 2
    stats = conversation.messages[1].stats
    assert stats is not None
    assert f"> {stats.generated_tokens} tokens · " in text
    assert "> MTP depth 3 (Leviathan–Chen) · acceptance by depth" in text
    assert "> This reply failed: the worker stopped unexpectedly" in text


def test_an_export_replaces_a_file_whole_and_leaves_no_partial_file(
    conversation: Conversation, tmp_path: Path
) -> None:
    target = tmp_path / "chat.md"
    target.write_text("an older export", encoding="utf-8")
    export_conversation(conversation, target, replace=True)
    assert target.read_text(encoding="utf-8").startswith("# Lines in a file")
    assert [p.name for p in tmp_path.iterdir()] == ["chat.md"]


def test_an_unwritable_destination_is_a_readable_error(
    conversation: Conversation, tmp_path: Path
) -> None:
    with pytest.raises(ExportError, match="choose a folder you can write to"):
        export_conversation(conversation, tmp_path / "missing-folder" / "chat.json")
