"""``chat``/``serve`` load options as a user types them: --ctx, --kv-type, --flash-attn,
--state-cache-mib and --threads; a bad value is one clear line (exit 2), good ones load the
model with them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from openai import OpenAI

from app.cli import main
from app.engine.chat.model_files import describe_model
from app.engine.load_options import DEFAULT_STATE_CACHE_MIB, FLASH_ATTENTION_MODES, KV_CACHE_TYPES
from app.engine.runtime.backends.llama_cpp import model as llama_cpp_model
from app.engine.runtime.core import backend
from app.engine.runtime.core.cpu_threads import choose_threads
from app.engine.runtime.core.demo_model import demo_model_path
from tests.server.server_process import running_server


def test_the_light_value_lists_are_the_backends() -> None:
    assert tuple(llama_cpp_model.KV_CACHE_TYPES) == KV_CACHE_TYPES
    assert tuple(llama_cpp_model.FLASH_ATTENTION_MODES) == FLASH_ATTENTION_MODES
    assert backend.DEFAULT_STATE_CACHE_MIB == DEFAULT_STATE_CACHE_MIB


@pytest.mark.parametrize("command", ["chat", "serve"])
@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--kv-type", "q5"], "--kv-type 'q5' is unknown: use one of f16, q8_0, q4_0"),
        (["--flash-attn", "yes"], "--flash-attn 'yes' is unknown: use one of auto, on, off"),
        (
            ["--kv-type", "q4_0", "--flash-attn", "off"],
            "--kv-type q4_0 needs flash attention (llama.cpp cannot quantise the V cache without "
            "it): set --flash-attn to auto or on, or use f16",
        ),
        (["--ctx", "-1"], "--ctx -1 is invalid: use 0"),
        (["--state-cache-mib", "-5"], "--state-cache-mib -5 is invalid: use 0"),
        (["--threads", "-2"], "--threads -2 is invalid: use 0 (llama.cpp's default"),
    ],
)
def test_bad_load_options_are_one_clear_line_and_exit_2(
    tiny_models: dict[str, Path],
    capsys: pytest.CaptureFixture,
    command: str,
    extra: list[str],
    message: str,
) -> None:
    args = [command, "--model", str(tiny_models["mtp"]), *extra]
    if command == "chat":
        args += ["--prompt", "x"]
    else:
        args += ["--port", "0"]
    assert main(args) == 2
    error = capsys.readouterr().err
    assert error.startswith("mtp-studio: error: ") and message in error
    assert error.count("\n") == 1


@pytest.mark.slow
def test_chat_runs_the_demo_model_with_a_q8_0_cache_and_flash_attention(
    capsys: pytest.CaptureFixture,
) -> None:
    args = ["chat", "--kv-type", "q8_0", "--flash-attn", "on", "--state-cache-mib", "64"]
    prompt = ["--prompt", "Write a function that adds two numbers.", "--temp", "0"]
    assert main([*args, *prompt, "--max-tokens", "16", "--threads", "1"]) == 0
    captured = capsys.readouterr()
    assert captured.out.strip(), "the model answered"
    assert "KV cache q8_0 · flash attention on · kept states ≤ 64 MiB" in captured.err
    assert (
        "backend: llama.cpp — " in captured.err and "threads 1 (set in the options)" in captured.err
    )
    assert re.search(r"16 tokens \(length\) · [\d.]+ tok/s decode", captured.err)
    # No --ctx: the context is chosen for this machine, up to the model's trained context.
    trained = describe_model(demo_model_path()).shape.trained_context
    context = int(re.search(r"context (\d+) tokens \(", captured.err)[1])
    assert 0 < context <= trained


def test_a_set_context_is_the_one_the_model_gets(capsys: pytest.CaptureFixture) -> None:
    args = ["chat", "--ctx", "1536", "--threads", "1", "--kv-type", "q4_0", "--temp", "0"]
    assert main([*args, "--prompt", "Hi", "--max-tokens", "2"]) == 0
    err = capsys.readouterr().err
    assert "context 1536 tokens (set in the load options) · KV cache q4_0" in err


def test_a_quantised_cache_on_heads_it_cannot_split_is_one_clear_line(
    tiny_models: dict[str, Path], capsys: pytest.CaptureFixture
) -> None:
    """llama.cpp quantises the KV cache in blocks of 32: the tiny model's heads are 16 wide."""
    args = ["chat", "--model", str(tiny_models["mtp"]), "--kv-type", "q8_0", "--prompt", "x"]
    assert main(args) == 2
    error = capsys.readouterr().err
    assert error == (
        "mtp-studio: error: --kv-type q8_0 cannot be used: tiny-mtp.gguf's attention heads are "
        "16 values wide, not a multiple of q8_0's 32-value blocks; use --kv-type f16\n"
    )


def test_json_output_stays_one_object_per_answer(
    tiny_models: dict[str, Path], capsys: pytest.CaptureFixture
) -> None:
    args = ["chat", "--model", str(tiny_models["mtp"]), "--threads", "1", "--state-cache-mib", "0"]
    assert main([*args, "--prompt", "Hi", "--max-tokens", "2", "--json", "--temp", "0"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert len(answer["token_ids"]) == 2


@pytest.mark.slow
def test_serve_loads_the_model_with_the_load_options_and_says_so(tmp_path: Path) -> None:
    options = ("--kv-type", "q8_0", "--flash-attn", "on", "--ctx", "2048", "--threads", "1")
    with running_server(*options, home=tmp_path) as server:
        line = server.wait_for_line("context 2048 tokens .*KV cache")
        reply = OpenAI(base_url=server.base_url, api_key="none").chat.completions.create(
            model="demo-mtp", messages=[{"role": "user", "content": "Hi"}], max_tokens=4
        )
    assert "KV cache q8_0 · flash attention on" in line
    assert reply.usage.completion_tokens >= 1


@pytest.mark.slow
def test_help_and_the_backend_line_name_the_default_threads(
    tiny_models: dict[str, Path], capsys: pytest.CaptureFixture
) -> None:
    default = choose_threads(0)
    with pytest.raises(SystemExit):
        main(["chat", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert f"what llama.cpp's own tools use, here {default.describe()}" in help_text
    args = ["chat", "--model", str(tiny_models["mtp"]), "--prompt", "Hi", "--max-tokens", "2"]
    assert main([*args, "--temp", "0"]) == 0
    line = capsys.readouterr().err
    if default.threads > 1:  # the step count is timed at load: the line says what was chosen
        fewer = rf"· threads \d+, {default.batch_threads} for prompts \(timed faster than "
        assert re.search(fewer + rf"{default.threads} here: {default.threads} threads ", line) or (
            f"· {default.describe()[:-1]}; fewer were not faster: {default.threads} threads "
            in line
        )
    else:
        assert f"· {default.describe()}" in line
