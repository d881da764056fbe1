"""A request's prompt tokens counted in the caller's process, while the worker generates.

The worker runs one generation at a time; asking it to count a prompt (Anthropic's
``count_tokens``, which Claude Code calls often) used to prefill the whole conversation behind
whatever was generating. The count needs only the tokenizer and the chat template, so this loads
those without the weights (:func:`~app.engine.runtime.backends.choice.open_vocabulary`) and
renders the prompt exactly as the worker will (:func:`~app.engine.runtime.core.prompt.
prompt_token_ids`): a count takes milliseconds and no worker time.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

from app.engine.errors import RuntimeBackendError
from app.engine.runtime.backends.choice import Vocabulary, open_vocabulary
from app.engine.runtime.chat_format.images import ImagePart
from app.engine.runtime.core.prompt import prompt_token_ids
from app.engine.runtime.core.request import GenerationRequest


class PromptCounter:
    """Counts prompts for the model at ``model_path`` on ``backend`` (a chosen backend's name);
    thread-safe (counts run one at a time). Images need the model's projector to be counted:
    a request with one is the worker's to count."""

    def __init__(self, backend: str, model_path: Path) -> None:
        self._name = Path(model_path).name
        self._vocabulary = open_vocabulary(backend, Path(model_path))
        self._lock = threading.Lock()
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def chat_template(self) -> str | None:
        return self._vocabulary.chat_template

    def count(self, request: GenerationRequest) -> int:
        """The prompt tokens the worker would prefill for ``request`` (one without images);
        raises :class:`RuntimeBackendError` once the counter is closed (its model unloaded)."""
        with self._lock:
            if self._closed:
                raise RuntimeBackendError(f"the tokenizer of {self._name} was closed")
            return len(
                prompt_token_ids(
                    TextOnly(self._vocabulary),
                    request,
                    self._name,
                    no_images_reason="images are counted by the model's worker, not here",
                )
            )

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            close = getattr(self._vocabulary, "close", None)
            if close is not None:
                close()


class TextOnly:
    """A vocabulary as a :class:`~app.engine.runtime.core.prompt.PromptText` that reads no
    images."""

    def __init__(self, vocabulary: Vocabulary) -> None:
        self._vocabulary = vocabulary
        self.tokenize = vocabulary.tokenize
        self.chat_template = vocabulary.chat_template
        self.special_token_texts = vocabulary.special_token_texts
        self.bos_token_id = vocabulary.bos_token_id
        self.image_marker: str | None = None

    def tokenize_with_images(self, text: str, images: Sequence[ImagePart]) -> list[int]:
        raise AssertionError("prompt_token_ids refuses images before it gets here")
