"""Pictures in the chat history, as a user relies on them: a picture attached to a message comes
back with it (at its place, byte for byte), the same picture sent many times is stored once, a
deleted conversation takes its pictures along unless another conversation still shows them, an
edited message keeps its pictures (or takes others), an older history opens and gains pictures,
the request for the next reply carries them, and an export holds them."""

from __future__ import annotations

import base64
import io
import json
import sqlite3
from pathlib import Path

import pytest
from PIL import Image

from app.engine.chat.attachments import (
    pasted_attachment,
    placed_first,
    read_attachment,
    thumbnail_png,
)
from app.engine.chat.conversation import ChatSettings, reply_request
from app.engine.chat.export import export_conversation
from app.engine.chat.history import HistoryStore
from app.engine.errors import ImageError
from app.engine.runtime.chat_format.images import ImageLimits
from app.engine.runtime.chat_format.prompting import PlacedImage
from tests.vision.conftest import picture


@pytest.fixture
def store(tmp_path: Path) -> HistoryStore:
    opened = HistoryStore(tmp_path / "chat.sqlite3")
    yield opened
    opened.close()


def attached(tmp_path: Path, seed: int, name: str = "photo.png"):
    path = tmp_path / name
    path.write_bytes(picture(120, 80, seed=seed))
    return read_attachment(path)


def test_a_picture_comes_back_with_its_message(store: HistoryStore, tmp_path: Path) -> None:
    cat = attached(tmp_path, 1)
    conversation = store.create_conversation("Pictures", ChatSettings())
    store.add_user_message(conversation, "What is this?", placed_first([cat]))
    store.add_user_message(conversation, "Compare: and", (PlacedImage(9, cat),))
    messages = store.conversation(conversation).messages
    assert messages[0].images == (PlacedImage(0, cat),)
    assert messages[0].images[0].image.data == cat.data
    assert messages[1].images == (PlacedImage(9, cat),)
    request = reply_request(ChatSettings(), messages)
    assert [m.images for m in request.messages] == [messages[0].images, messages[1].images]


def test_the_same_picture_is_stored_once_and_goes_with_its_last_conversation(
    store: HistoryStore, tmp_path: Path
) -> None:
    cat, dog = attached(tmp_path, 1), attached(tmp_path, 2, "dog.png")
    first = store.create_conversation("One", ChatSettings())
    second = store.create_conversation("Two", ChatSettings())
    for _ in range(3):
        store.add_user_message(first, "Again", placed_first([cat]))
    store.add_user_message(second, "Both", placed_first([cat, dog]))
    assert store.image_bytes() == len(cat.data) + len(dog.data)
    store.delete(second)
    assert store.image_bytes() == len(cat.data)  # the cat is still shown in the first
    store.delete(first)
    assert store.image_bytes() == 0


def test_an_edited_message_keeps_or_replaces_its_pictures(
    store: HistoryStore, tmp_path: Path
) -> None:
    cat, dog = attached(tmp_path, 1), attached(tmp_path, 2, "dog.png")
    conversation = store.create_conversation("Edit", ChatSettings())
    message = store.add_user_message(conversation, "A long question", (PlacedImage(15, cat),))
    kept = store.branch(message.id, "Short")
    assert store.conversation(conversation).messages[-1].images == (PlacedImage(5, cat),)
    store.branch(kept.id, "Other", placed_first([dog]))
    assert store.conversation(conversation).messages[-1].images == (PlacedImage(0, dog),)
    store.choose_version(message.id)  # the original is kept, with its picture
    assert store.conversation(conversation).messages[-1].images == (PlacedImage(15, cat),)


def test_a_history_from_before_pictures_opens_and_takes_them(tmp_path: Path) -> None:
    database = tmp_path / "chat.sqlite3"
    old = HistoryStore(database)
    conversation = old.create_conversation("Old", ChatSettings())
    old.add_user_message(conversation, "Before pictures")
    old.close()
    with sqlite3.connect(database) as db:  # as version 2 left it
        db.execute("DROP TABLE message_images")
        db.execute("DROP TABLE images")
        db.execute("PRAGMA user_version=2")
    reopened = HistoryStore(database)
    try:
        reopened.add_user_message(conversation, "After", placed_first([attached(tmp_path, 3)]))
        messages = reopened.conversation(conversation).messages
        assert [m.content for m in messages] == ["Before pictures", "After"]
        assert len(messages[1].images) == 1
    finally:
        reopened.close()


def test_an_export_holds_the_pictures(store: HistoryStore, tmp_path: Path) -> None:
    cat = attached(tmp_path, 1)
    conversation = store.create_conversation("Export", ChatSettings())
    store.add_user_message(conversation, "What is this?", placed_first([cat]))
    saved = store.conversation(conversation)
    document = json.loads(export_conversation(saved, tmp_path / "chat.json").read_text())
    image = document["messages"][0]["images"][0]
    assert base64.b64decode(image["data"]) == cat.data
    assert (image["offset"], image["sha256"], image["media_type"]) == (0, cat.sha256, "image/png")
    markdown = export_conversation(saved, tmp_path / "chat.md").read_text()
    inline = "![picture 1](data:image/png;base64," + base64.b64encode(cat.data).decode() + ")"
    assert inline in markdown and markdown.index(inline) < markdown.index("What is this?")


def test_attachments_are_checked_and_shown_small(tmp_path: Path) -> None:
    cat = attached(tmp_path, 1)
    thumbnail = Image.open(io.BytesIO(thumbnail_png(cat, side=60)))
    assert thumbnail.size == (60, 40)
    broken = tmp_path / "broken.png"
    broken.write_bytes(picture(120, 80, seed=1)[:200])
    with pytest.raises(ImageError, match=r"broken\.png: .*damaged or cut short"):
        read_attachment(broken)
    big = tmp_path / "big.png"
    big.write_bytes(b"\0" * (2 * 2**20))
    with pytest.raises(ImageError, match=r"big\.png: the picture is 2\.0 MiB") as caught:
        read_attachment(big, ImageLimits(max_bytes=2**20))
    assert caught.value.too_large
    with pytest.raises(ImageError, match="the pasted picture"):
        pasted_attachment(b"not a picture")
