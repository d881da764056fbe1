"""A vision model's images on their way into a context: prompt text and images → cells → KV.

The backend turns a rendered prompt whose images stand at the projector's marker into a token
list in which each image is its cells' pseudo-ids (:mod:`..image_cells`), keeping the projector's
prepared image chunks (resized and normalised by ``mtmd_tokenize``) until the prefill that
evaluates them. Evaluating one runs the vision encoder and decodes its embeddings into the
context at a position (:meth:`~.images.VisionProjector.evaluate_image`), and reads the hidden
state of the image's last row, which the MTP head pairs with the first text token after it
(docs/vision.md#images-in-generation-mtp-drafts-kept). An image prefix reuse kept is
never handed here again, so a follow-up question about the same picture encodes nothing.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from app.engine.errors import RuntimeBackendError
from app.engine.runtime.backends.image_cells import ImageRun, image_at, image_cells
from app.engine.runtime.backends.llama_cpp.contexts import LlamaContext
from app.engine.runtime.backends.llama_cpp.images import TEXT, ImagePrompt, VisionProjector
from app.engine.runtime.chat_format.images import ImagePart, RgbImage, rgb_pixels

_DECODED_KEPT = 4
"""Decoded images kept by file hash: a request renders its prompt twice (the whole, and up to its
last user message), and a conversation re-sends its pictures every turn."""


class ImageInput:
    """The projector of a loaded model and the image chunks prepared for the next prefill."""

    def __init__(self, projector: VisionProjector) -> None:
        self.projector = projector
        self._pending: dict[int, tuple[ImagePrompt, int]] = {}
        self._prompts: list[ImagePrompt] = []
        self._decoded: OrderedDict[str, RgbImage] = OrderedDict()

    @property
    def marker(self) -> str:
        return self.projector.marker

    def tokens(self, text: str, images: Sequence[ImagePart], bos: int | None) -> list[int]:
        """``text`` with ``images`` at its markers as cells: text token ids and each image's
        pseudo-ids; the prepared images wait for :meth:`evaluate`. ``bos`` is put first when
        the model wants one."""
        prompt = self.projector.split(text, [self._pixels(image) for image in images])
        self._prompts.append(prompt)
        cells: list[int] = []
        for index, chunk in enumerate(prompt.chunks):
            if chunk.kind == TEXT:
                cells.extend(chunk.tokens)
                continue
            assert chunk.image_hash is not None
            ids = image_cells(chunk.image_hash, chunk.n_tokens, chunk.n_positions)
            run = image_at(ids, 0)
            assert run is not None
            self._pending[run.key] = (prompt, index)
            cells.extend(ids)
        if bos is not None and (not cells or cells[0] != bos):
            cells.insert(0, bos)
        return cells

    def evaluate(
        self,
        run: ImageRun,
        context: LlamaContext,
        position: int,
        batch_size: int,
        *,
        with_hidden: bool,
    ) -> np.ndarray | None:
        """Encode the image ``run`` stands for and decode it into ``context`` from ``position``;
        the hidden state of its last row when ``with_hidden`` (the context exports them)."""
        pending = self._pending.get(run.key)
        if pending is None:
            raise RuntimeBackendError(
                "an image of the prompt was not prepared by the projector; the prompt must be "
                "made by the backend that evaluates it"
            )
        prompt, index = pending
        after = self.projector.evaluate_image(prompt, index, context.pointer, position, batch_size)
        if after != position + run.n_positions:
            raise RuntimeBackendError(
                f"the image took positions {position}..{after}, not the {run.n_positions} its "
                "chunk announced"
            )
        if not with_hidden:
            return None
        last_rows = run.n_cells - (run.n_cells - 1) // batch_size * batch_size
        return context.hidden_rows(last_rows)[-1].copy()

    def release(self) -> None:
        """Free the prepared images (after a prefill, which evaluated what it needed)."""
        for prompt in self._prompts:
            prompt.close()
        self._prompts = []
        self._pending = {}

    def close(self) -> None:
        self.release()
        self.projector.close()

    def _pixels(self, image: ImagePart) -> RgbImage:
        decoded = self._decoded.get(image.sha256)
        if decoded is None:
            decoded = self._decoded[image.sha256] = rgb_pixels(image)
            while len(self._decoded) > _DECODED_KEPT:
                self._decoded.popitem(last=False)
        self._decoded.move_to_end(image.sha256)
        return decoded
