"""Messages in the window never name a command-line switch the window does not have.

Every string the engine can say is read from its source; each flag in one (``--ctx``) must be
rewritten into the window's words by :func:`app.ui.wording.in_window_words` or be listed as
one no window action can lead to. A whole command (``mtp-studio …``, ``pip install …``) is
advice to run that command and may keep its flags. The command line's own modules (the server,
benchmarks, launch commands) are not read: the window never shows their messages.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from app.engine.errors import RuntimeBackendError
from app.engine.load_options import LoadOptions, load_options_problem
from app.ui.chat.bridges.runtime_bridge import crash_advice
from app.ui.errors import readable
from app.ui.settings_dialog import WINDOW_FIELD_NAMES
from app.ui.wording import COMMAND_LINE_ONLY, FLAG, flags_left, in_window_words

ENGINE = Path(__file__).resolve().parents[2] / "app" / "engine"
COMMAND_LINE_MODULES = ("server/", "runtime/bench/", "cluster_launch.py", "mtp/benchmark.py")


def engine_messages() -> list[tuple[str, str]]:
    """(module, text) of every string literal in the engine that names a flag and is more than
    the flag itself (an argument list's ``"--port"`` is no message)."""
    found = []
    for path in sorted(ENGINE.rglob("*.py")):
        name = path.relative_to(ENGINE).as_posix()
        if name.startswith(COMMAND_LINE_MODULES):
            continue
        tree = ast.parse(path.read_text())
        skipped = {  # docstrings, and the pieces of an f-string (read whole instead)
            id(child)
            for node in ast.walk(tree)
            for child in ast.iter_child_nodes(node)
            if (isinstance(node, ast.Expr) and isinstance(child, ast.Constant))
            or isinstance(node, ast.JoinedStr)
        }
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            if isinstance(node, ast.JoinedStr):
                text = "".join(
                    part.value if isinstance(part, ast.Constant) else "{}" for part in node.values
                )
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value
            else:
                continue
            if FLAG.search(text) and not FLAG.fullmatch(text.strip()) and "\n" not in text.strip():
                found.append((name, text))
    return found


@pytest.mark.slow
def test_every_flag_in_an_engine_message_is_said_the_windows_way() -> None:
    messages = engine_messages()
    assert len(messages) > 20  # the reader finds the engine's messages
    left = {
        (module, flag)
        for module, text in messages
        for flag in flags_left(in_window_words(text))
        if flag not in COMMAND_LINE_ONLY
    }
    assert left == set()


def test_a_full_context_names_the_setting_not_the_flag() -> None:
    error = RuntimeBackendError(
        "the conversation no longer fits the 4096-token context of demo-mtp.gguf; start a new "
        "conversation or load the model with a larger context (--ctx)"
    )
    assert readable(error).endswith("choose a larger Context window in Settings")
    assert "--" not in readable(error)


def test_the_settings_dialog_names_its_own_fields() -> None:
    problem = load_options_problem(
        LoadOptions(kv_cache_type="q8_0", flash_attention="off"), WINDOW_FIELD_NAMES
    )
    assert problem is not None and "flash_attention" not in problem
    assert "set Flash attention to auto or on" in problem


def test_a_worker_that_died_by_sigill_is_not_told_to_choose_a_smaller_model() -> None:
    died = (
        "the llama.cpp worker stopped unexpectedly while generating with demo-mtp.gguf (killed by "
        "SIGILL)"
    )
    assert "smaller model" not in crash_advice(died)
    assert "smaller model" in crash_advice(died.replace("SIGILL", "SIGKILL"))
