"""Pictures for the next message (or for an edited one): from the Attach button's file dialog, a
drop on the window, or a paste; read, checked and thumbnailed in a background thread.

Every picture goes through the engine's :func:`~app.engine.chat.attachments.read_attachment`
(a file) or :func:`~app.engine.chat.attachments.pasted_attachment` (clipboard or dragged bytes):
PNG, JPEG or WebP within the limits, fully decoded, so a damaged file, a decompression bomb or a
GIF is refused at once with one line naming it, in the banner (docs/vision.md). An image Qt
holds (a paste from an app that offers no encoded bytes) is encoded as PNG first, in the same
thread. Those read wait above the message box (:attr:`Composer.attachments`) or join the version
being edited (:meth:`MessageWidget.add_edit_picture`), in the order they were given.

A model that reads no pictures (no projector, or loaded for text only) turns the Attach button
off with the reason as its tooltip; a picture offered anyway, or already waiting when such a
model is loaded, gets the reason in the banner, in one line.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QObject
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QFileDialog, QWidget

from app.engine.chat.attachments import pasted_attachment, read_attachment
from app.engine.errors import MtpStudioError
from app.engine.runtime.chat_format.images import ImagePart
from app.ui.background import run_in_background
from app.ui.chat.bridges.remote_bridge import RemoteBridge
from app.ui.chat.bridges.reply_target import ReplyTarget
from app.ui.chat.bridges.runtime_bridge import RuntimeBridge
from app.ui.chat.transcript.column import TranscriptView
from app.ui.chat.widgets.banner import Banner
from app.ui.chat.widgets.composer import Composer
from app.ui.chat.widgets.picture_offer import PictureOffer
from app.ui.errors import readable
from app.ui.thumbnails import thumbnail_image

log = logging.getLogger(__name__)

MAX_PICTURES = 8
"""Pictures one message may carry (a server takes at most 8 per request by default)."""
PICTURE_FILTER = "Pictures (*.png *.jpg *.jpeg *.webp);;All files (*)"
TOO_MANY_TEXT = "A message takes at most {limit} pictures: send these first, or take some away."

Read = tuple[ImagePart, QImage] | str
"""A picture read, with its thumbnail, or why it could not be (one line)."""


class AttachmentControl(QObject):
    """Reads the pictures offered to the chat window (``window``) for the next message or for
    the version of a message being edited."""

    def __init__(
        self,
        window: QWidget,
        *,
        composer: Composer,
        transcript: TranscriptView,
        banner: Banner,
        target: ReplyTarget,
        bridge: RuntimeBridge,
        remote_bridge: RemoteBridge,
    ) -> None:
        super().__init__(window)
        self._window = window
        self._composer = composer
        self._transcript = transcript
        self._banner = banner
        self._target = target
        self._reading = 0
        self.dialog: QFileDialog | None = None
        composer.attach_requested.connect(self.ask_files)
        composer.pictures_offered.connect(self.take)
        transcript.attach_to_edit_requested.connect(self.ask_files)
        for signal in (bridge.loading, bridge.loaded, bridge.load_failed, bridge.unloaded):
            signal.connect(self.refresh)  # bound slots: dropped with the window
        remote_bridge.connected.connect(self.refresh)
        remote_bridge.connect_failed.connect(self.refresh)

    @property
    def reading(self) -> bool:
        """Whether pictures are being read in the background."""
        return self._reading > 0

    def refresh(self, *_what: object) -> None:
        """Attaching follows the model that answers: off, with the reason, for one that reads
        no pictures (and the reason in the banner if pictures already wait)."""
        refused = self._target.pictures_refused()
        self._composer.set_attach_refused(refused)
        if refused is not None and self._composer.attachments.tiles:
            self._banner.show_text(refused)

    def ask_files(self, message_id: int = 0) -> QFileDialog:
        """The file dialog for pictures: for the next message, or (``message_id``) for the
        version of that message being edited."""
        self.dialog = QFileDialog(self._window, "Attach pictures", "", PICTURE_FILTER)
        self.dialog.setFileMode(QFileDialog.FileMode.ExistingFiles)
        self.dialog.filesSelected.connect(
            lambda paths: self.attach_files([Path(p) for p in paths], message_id)
        )
        self.dialog.open()
        return self.dialog

    def attach_files(self, paths: Sequence[Path], message_id: int = 0) -> None:
        self._read([lambda path=path: read_attachment(path) for path in paths], message_id)

    def take(self, offer: PictureOffer, message_id: int = 0) -> None:
        """What a drop or a paste offered: files, an encoded picture, or an image."""
        if offer.paths:
            self.attach_files(offer.paths, message_id)
        elif offer.encoded is not None:
            data = offer.encoded
            self._read([lambda: pasted_attachment(data)], message_id)
        elif offer.image is not None:
            image = offer.image
            self._read([lambda: pasted_attachment(_png_bytes(image))], message_id)

    def _read(self, readers: list[Callable[[], ImagePart]], message_id: int) -> None:
        refused = self._target.pictures_refused()
        if refused is not None:
            self._banner.show_text(refused)
            return
        if not message_id:
            waiting = len(self._composer.attachments.tiles)
            if waiting + len(readers) > MAX_PICTURES:
                self._banner.show_text(TOO_MANY_TEXT.format(limit=MAX_PICTURES))
                return
        self._reading += 1
        run_in_background(
            lambda: [_read_one(reader) for reader in readers],
            lambda read: self._arrived(read, message_id),
            lambda exc: self._failed(exc, message_id),
        )

    def _failed(self, exc: BaseException, message_id: int) -> None:
        log.error("reading pictures failed", exc_info=(type(exc), exc, exc.__traceback__))
        self._arrived([readable(exc)], message_id)

    def _arrived(self, read: list[Read], message_id: int) -> None:
        self._reading -= 1
        problems = [item for item in read if isinstance(item, str)]
        for item in read:
            if isinstance(item, str):
                continue
            picture, thumbnail = item
            self._transcript.thumbnails.put(picture, thumbnail)
            if not message_id:
                self._composer.attachments.add(picture)
            elif (widget := self._transcript.message(message_id)) is not None:
                widget.add_edit_picture(picture)
        if problems:
            more = f" ({len(problems) - 1} more not read)" if len(problems) > 1 else ""
            self._banner.show_text(problems[0] + more)


def _read_one(reader: Callable[[], ImagePart]) -> Read:
    """One picture read and thumbnailed (in the background thread), or its problem."""
    try:
        picture = reader()
        return picture, thumbnail_image(picture)
    except MtpStudioError as exc:
        return readable(exc)


def _png_bytes(image: QImage) -> bytes:
    """An image Qt holds, encoded as PNG (in the background thread: QImage is safe there)."""
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    if not image.save(buffer, "PNG"):
        raise MtpStudioError("the pasted picture could not be encoded; save it as a PNG file")
    buffer.close()
    return bytes(data.data())
