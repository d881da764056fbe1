"""Images into a llama.cpp context through llama.cpp's multimodal library (libmtmd).

A vision GGUF comes as two files: the language model and a projector (``mmproj-*.gguf``: the
vision encoder and the layers that map its output into the model's embedding space). llama.cpp
runs the pair with ``libmtmd``; the pinned llama-cpp-python (0.3.36) ships that library beside
``libllama`` and binds it, function for function, in ``llama_cpp.mtmd_cpp`` (ctypes mirror of
``mtmd.h`` and ``mtmd-helper.h``). Its high-level ``MTMDChatHandler`` drives it for the ``Llama``
class, which this runtime does not use, so the low-level calls are made here:

- :class:`VisionProjector` loads the projector for an already loaded ``llama_model``
  (``mtmd_init_from_file``) with a media marker of its own: a random string per projector, so
  text a user types can never be taken for an image's place.
- :meth:`VisionProjector.split` tokenizes a prompt whose images stand at markers
  (``mtmd_tokenize``) into chunks: text chunks (token ids, which the caller decodes as it decodes
  any text) and image chunks (already preprocessed: resized and normalised as the projector
  wants). mtmd wraps each image in the model's own begin/end tokens (``<|vision_start|>`` …
  ``<|vision_end|>`` for Qwen).
- :meth:`VisionProjector.evaluate_image` runs the encoder on one image chunk and decodes its
  embeddings into a context at a given position (``mtmd_encode_chunk`` +
  ``mtmd_helper_decode_image_chunk``: M-RoPE positions, non-causal attention where the model
  wants it, splitting into batches); :meth:`VisionProjector.evaluate_all` is llama.cpp's own
  path for a whole prompt (``mtmd_helper_eval_chunks``), the reference the tests compare with.

An image chunk occupies ``n_tokens`` cells of the KV cache but advances the position by
``n_positions``, which differ on M-RoPE models (Qwen-VL, Qwen3.5: an image of w × h tokens takes
max(w, h) positions). Each image chunk carries the hash of its pixels (:class:`RgbImage`), the
key prefix reuse matches images by.
"""

from __future__ import annotations

import ctypes
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import llama_cpp
import llama_cpp.mtmd_cpp as mtmd

from app.engine.errors import ImageError, RuntimeBackendError
from app.engine.runtime.backends.llama_cpp import log as llama_cpp_log
from app.engine.runtime.chat_format.images import RgbImage

TEXT, IMAGE = "text", "image"
_CHUNK_KINDS = {mtmd.MTMD_INPUT_CHUNK_TYPE_TEXT: TEXT, mtmd.MTMD_INPUT_CHUNK_TYPE_IMAGE: IMAGE}


@dataclass(frozen=True)
class PromptChunk:
    """One piece of a split prompt. ``tokens``: a text chunk's ids (empty for an image).
    ``n_tokens``: the KV cells it fills; ``n_positions``: how far it advances the position.
    ``image_hash``: the hash of an image's pixels (None for text)."""

    kind: str
    tokens: tuple[int, ...]
    n_tokens: int
    n_positions: int
    image_hash: str | None = None


class ImagePrompt:
    """A prompt split into chunks by :meth:`VisionProjector.split`; owns mtmd's chunk list."""

    def __init__(self, handle: int, chunks: tuple[PromptChunk, ...]) -> None:
        self._handle = handle
        self.chunks = chunks

    @property
    def n_tokens(self) -> int:
        return sum(chunk.n_tokens for chunk in self.chunks)

    @property
    def n_positions(self) -> int:
        return sum(chunk.n_positions for chunk in self.chunks)

    def native_chunk(self, index: int) -> int:
        self._check_open()
        return mtmd.mtmd_input_chunks_get(self._handle, index)

    @property
    def native(self) -> int:
        self._check_open()
        return self._handle

    def _check_open(self) -> None:
        if not self._handle:
            raise RuntimeBackendError("the split prompt was already closed")

    def close(self) -> None:
        if self._handle:
            mtmd.mtmd_input_chunks_free(self._handle)
            self._handle = 0

    def __enter__(self) -> ImagePrompt:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


class VisionProjector:
    """A projector file loaded for one llama.cpp model."""

    def __init__(
        self,
        path: Path,
        model: llama_cpp.llama_model_p,
        *,
        threads: int,
        use_gpu: bool,
        image_max_tokens: int | None = None,
    ) -> None:
        llama_cpp_log.install_multimodal()
        self.path = Path(path)
        self.marker = f"<__image_{secrets.token_hex(8)}__>"
        params = mtmd.mtmd_context_params_default()
        params.use_gpu = use_gpu
        params.n_threads = threads
        params.print_timings = False
        params.warmup = False
        params.media_marker = self.marker.encode()
        if image_max_tokens is not None:
            params.image_max_tokens = image_max_tokens
        self._marker_bytes = params.media_marker  # the struct keeps only a pointer to it
        self._ctx = mtmd.mtmd_init_from_file(str(self.path).encode(), model, params)
        if not self._ctx:
            raise RuntimeBackendError(
                f"llama.cpp could not load the vision projector {self.path.name} "
                f"({llama_cpp_log.take_recent()}); it may be damaged, or made for another model"
            )
        if not mtmd.mtmd_support_vision(self._ctx):
            self.close()
            raise RuntimeBackendError(
                f"{self.path.name} is a projector without image input (audio only, perhaps); "
                "choose the model's vision projector"
            )
        self.uses_mrope = bool(mtmd.mtmd_decode_use_mrope(self._ctx))

    def split(self, text: str, images: Sequence[RgbImage]) -> ImagePrompt:
        """``text`` (special tokens parsed, no BOS added) with ``images`` in order at its
        markers, tokenized and preprocessed into chunks."""
        markers = text.count(self.marker)
        if markers != len(images):
            raise ImageError(
                f"the prompt has {markers} image place(s) for {len(images)} image(s); the chat "
                "template must keep every message's text as given"
            )
        bitmaps = [self._bitmap(image) for image in images]
        handle = mtmd.mtmd_input_chunks_init()
        try:
            data = text.encode("utf-8")
            request = mtmd.mtmd_input_text(data, len(data), False, True)
            array = (mtmd.mtmd_bitmap_p_ctypes * max(1, len(bitmaps)))(*bitmaps)
            result = mtmd.mtmd_tokenize(
                self._ctx, handle, ctypes.byref(request), array, len(bitmaps)
            )
            if result != 0:
                raise ImageError(
                    f"llama.cpp could not prepare the image(s) for {self.path.name} (mtmd_tokenize "
                    f"returned {result}: {llama_cpp_log.take_recent()})"
                )
            chunks = tuple(
                self._describe(mtmd.mtmd_input_chunks_get(handle, index))
                for index in range(mtmd.mtmd_input_chunks_size(handle))
            )
        except BaseException:
            mtmd.mtmd_input_chunks_free(handle)
            raise
        finally:
            for bitmap in bitmaps:
                mtmd.mtmd_bitmap_free(bitmap)
        return ImagePrompt(handle, chunks)

    def evaluate_image(
        self,
        prompt: ImagePrompt,
        index: int,
        context: llama_cpp.llama_context_p,
        position: int,
        batch_size: int,
    ) -> int:
        """Encode image chunk ``index`` and decode its embeddings into ``context`` (sequence 0)
        from ``position``; returns the position after it."""
        chunk = prompt.native_chunk(index)
        if prompt.chunks[index].kind != IMAGE:
            raise RuntimeBackendError(f"chunk {index} of the prompt is not an image")
        if mtmd.mtmd_encode_chunk(self._ctx, chunk) != 0:
            raise RuntimeBackendError(
                f"the vision encoder of {self.path.name} failed ({llama_cpp_log.take_recent()})"
            )
        embeddings = mtmd.mtmd_get_output_embd(self._ctx)
        after = llama_cpp.llama_pos(0)
        result = mtmd.mtmd_helper_decode_image_chunk(
            self._ctx,
            context,
            chunk,
            embeddings,
            position,
            0,
            batch_size,
            ctypes.byref(after),
            mtmd.mtmd_helper_post_decode_callback(),
            None,
        )
        if result != 0:
            raise RuntimeBackendError(
                f"llama.cpp could not decode an image into the context (code {result}: "
                f"{llama_cpp_log.take_recent()}); the context may be full"
            )
        return after.value

    def evaluate_all(
        self,
        prompt: ImagePrompt,
        context: llama_cpp.llama_context_p,
        position: int,
        batch_size: int,
    ) -> int:
        """llama.cpp's own evaluation of the whole prompt (``mtmd_helper_eval_chunks``), with
        logits for the last text token; returns the position after the prompt."""
        after = llama_cpp.llama_pos(0)
        result = mtmd.mtmd_helper_eval_chunks(
            self._ctx, context, prompt.native, position, 0, batch_size, True, ctypes.byref(after)
        )
        if result != 0:
            raise RuntimeBackendError(
                f"llama.cpp could not evaluate the prompt with its image(s) (code {result}: "
                f"{llama_cpp_log.take_recent()})"
            )
        return after.value

    def close(self) -> None:
        if self._ctx:
            mtmd.mtmd_free(self._ctx)
            self._ctx = None

    def __enter__(self) -> VisionProjector:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _bitmap(self, image: RgbImage) -> int:
        expected = image.width * image.height * 3
        if len(image.pixels) != expected:
            raise ImageError(
                f"image {image.content_hash[:12]}: {len(image.pixels)} bytes of pixels for "
                f"{image.width}×{image.height} RGB ({expected} expected)"
            )
        buffer = (ctypes.c_uint8 * expected).from_buffer_copy(image.pixels)
        bitmap = mtmd.mtmd_bitmap_init(image.width, image.height, buffer)
        if not bitmap:
            raise ImageError(f"llama.cpp could not take image {image.content_hash[:12]}")
        mtmd.mtmd_bitmap_set_id(bitmap, image.content_hash.encode())
        return bitmap

    @staticmethod
    def _describe(chunk: int) -> PromptChunk:
        kind = _CHUNK_KINDS.get(mtmd.mtmd_input_chunk_get_type(chunk))
        if kind is None:
            raise ImageError(
                "the prompt holds media other than images (audio?), which is unsupported"
            )
        n_tokens = mtmd.mtmd_input_chunk_get_n_tokens(chunk)
        n_positions = mtmd.mtmd_input_chunk_get_n_pos(chunk)
        if kind == TEXT:
            count = ctypes.c_size_t(0)
            pointer = mtmd.mtmd_input_chunk_get_tokens_text(chunk, ctypes.byref(count))
            return PromptChunk(TEXT, tuple(pointer[: count.value]), n_tokens, n_positions)
        image_id = mtmd.mtmd_input_chunk_get_id(chunk)
        return PromptChunk(
            IMAGE, (), n_tokens, n_positions, image_id.decode() if image_id else None
        )
