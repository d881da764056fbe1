"""The runtime's image path against llama.cpp's own server on the same files: greedy text after a
picture, decoded the runtime's way (its own text batches, mtmd for the picture), is what
``llama-server --mmproj`` answers for the same picture and words — and differs from the answer
without the picture, so the picture is really read."""

from __future__ import annotations

import base64
import ctypes
import socket
import subprocess
import time
from pathlib import Path

import httpx2
import llama_cpp
import pytest

from app.engine.runtime.chat_format.images import ImageLimits, read_image, rgb_pixels
from app.engine.runtime.core.demo_model import DEMO_VISION_MODEL, DEMO_VISION_PROJECTOR
from tests.vision.conftest import decode_text, evaluate_by_chunks, last_logits, picture

pytestmark = pytest.mark.slow

NEW_TOKENS = 40
QUESTION = "Return the sum of a list."
PICTURE = picture(96, 64, seed=11)  # PNG: Pillow and llama.cpp's stb_image decode it alike
START_SECONDS = 120


def greedy_text(model, projector, new_context, images: list) -> str:
    """The runtime's way: the prompt split by mtmd, text decoded in its own batches."""
    marker = projector.marker if images else ""
    text = f"<|im_start|>user\n{marker}{QUESTION}<|im_end|>\n<|im_start|>assistant\n"
    vocab = llama_cpp.llama_model_get_vocab(model)
    context = new_context()
    pieces: list[bytes] = []
    with projector.split(text, images) as prompt:
        position = evaluate_by_chunks(projector, prompt, context, 0)
    for _ in range(NEW_TOKENS):
        token = int(last_logits(model, context).argmax())
        if llama_cpp.llama_vocab_is_eog(vocab, token):
            break
        buffer = ctypes.create_string_buffer(64)
        length = llama_cpp.llama_token_to_piece(vocab, token, buffer, 64, 0, False)
        pieces.append(buffer.raw[:length])
        position = decode_text(context, [token], position)
    return b"".join(pieces).decode("utf-8", errors="replace")


def llama_server_answer(binary: Path, content: object) -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [str(binary), "-m", str(DEMO_VISION_MODEL), "--mmproj", str(DEMO_VISION_PROJECTOR)]
    command += ["--host", "127.0.0.1", "--port", str(port), "-c", "2048", "-t", "2"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_SECONDS
        while True:
            assert process.poll() is None, "llama-server exited"
            assert time.monotonic() < deadline, "llama-server did not become ready"
            try:
                if httpx2.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx2.HTTPError:
                pass
            time.sleep(0.2)
        body = {
            "messages": [{"role": "user", "content": content}],
            "max_tokens": NEW_TOKENS,
            "temperature": 0,
        }
        reply = httpx2.post(f"{url}/v1/chat/completions", json=body, timeout=120)
        assert reply.status_code == 200, reply.text
        return reply.json()["choices"][0]["message"]["content"]
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_greedy_text_after_a_picture_is_llama_servers(
    llama_server_binary: Path, vision_model, projector, new_context
) -> None:
    image = rgb_pixels(read_image(PICTURE, ImageLimits(), "picture"))
    ours = greedy_text(vision_model, projector, new_context, [image])
    data_url = "data:image/png;base64," + base64.b64encode(PICTURE).decode()
    theirs = llama_server_answer(
        llama_server_binary,
        [{"type": "image_url", "image_url": {"url": data_url}}, {"type": "text", "text": QUESTION}],
    )
    assert ours == theirs
    assert greedy_text(vision_model, projector, new_context, []) != ours
