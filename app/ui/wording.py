"""The window's words for what the engine's messages say in the command line's words.

The engine's errors name the fix, and the fix is said for the command line, where most of them
first appear: "load the model with a larger context (--ctx)". In the window that names a switch
the user never sees. :func:`in_window_words` rewrites each such fix into the place the window
offers for it ("choose a larger Context window in Settings"); the app's readable errors
(:func:`app.ui.errors.readable`) pass through it, so the chat's banner, the Jobs page and every
error box say it the window's way. A test reads every string the engine can say and checks that
each flag in one is either rewritten here or listed in :data:`COMMAND_LINE_ONLY` with the reason
no window can meet it. A whole command (``mtp-studio extract --allow-partial``, a ``pip
install`` line) is advice to run that command and stays as it is.
"""

from __future__ import annotations

import re

WINDOW_WORDS: tuple[tuple[str, str], ...] = (
    (
        r"load the model with a larger context \(--ctx\)",
        "choose a larger Context window in Settings",
    ),
    (r"try a smaller --ctx", "choose a smaller Context window in Settings"),
    (r"or lower --mtp-depth", "or a lower Draft depth"),
    (r"type a message or pass --prompt TEXT", "type a message"),
    (r"pass --model with a \.gguf file", "open a .gguf file"),
    (r"pass --model PATH to a \.gguf model, or ", "open a .gguf model, or "),
    (
        r"pass --sidecar FILE with the model's MTP sidecar",
        "put the model's MTP sidecar (mtp.safetensors) in its folder",
    ),
    (r"use --backend (\S+) \(or auto\)", r"set Default backend to \1 (or auto) in Settings"),
    (r"chosen with --backend (\S+)", r"Default backend \1, chosen in Settings"),
    (r"\(use --force to extract and publish it again\)", "(Publish again re-extracts it)"),
    (r"\(use --force to extract again\)", "(Publish again re-extracts it)"),
    (r"point --scratch or (\S+) at", r"choose a Scratch folder in Settings, or point \1 at"),
    (r"--out (\S+) is", r"the output file \1 is"),
    (
        r"; pass --replace \(replace=True\) to swap in the sidecar's head",
        "; it needs no head from a sidecar",
    ),
    (
        r"\(mtp-studio download REPO --quant LABEL\)",
        "(the download wizard's quantisation choice fetches them all)",
    ),
    (r"check the path given to --catalog", "check the catalog file's path"),
    (r"\(--catalog is repeatable\)", "(File → Merge catalog… opens them together)"),
    (r"pass a catalog file with --catalog FILE", "open a catalog file (File → Open catalog…)"),
    (r", or a base model with --base ORG/NAME", ""),
    (r"pass --remote-model NAME", "choose a model for the connection"),
    (r"pass the server's key with --api-key", "enter the server's API key in the connection"),
    (r"and --remote-model", "and the connection's model"),
    (r"; pass --drafter FILE to name one", "; put its drafter GGUF in the model's folder"),
    (r"; pass --drafter FOLDER", "; put the drafter's folder beside the model's"),
    (r"; --mmproj FILE names one", "; choose one with the Projector button in the model bar"),
    (r": drop --mmproj", ': choose "No projector (text only)" under the Projector button'),
)
"""``(pattern, replacement)``, applied in order (``re.sub``)."""

COMMAND_LINE_ONLY: dict[str, str] = {
    "--q-bits": "the window offers the supported bit widths as buttons",
    "--quant": "the download wizard picks files by quantisation or by pattern, never both",
    "--include": "the download wizard picks files by quantisation or by pattern, never both",
    "--projector": "the download wizard fetches a projector only with the quantisation it picked",
    "--mtp": "names llama.cpp's own converter switch (a command of another tool)",
    "--limit": "the Discover page asks for a fixed number of repos; only the CLI takes a count",
    "--portable": "names the set-up command (bash packaging/setup.sh --portable) a terminal runs",
    "--replace": "the window's graft adds a head to a model without one; it replaces none",
    "--api-key": "the Server page calls only the server it started, with that server's key; "
    "the key hint is for mtp-studio ps",
}
"""Flags in engine messages that no window action can lead to, and why."""

COMMAND = re.compile(r"`[^`]*`|(?:pip|mtp-studio|python)\s[^;)]*")
"""A whole command in a message: its flags are part of advice to run it."""
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z-]*")


def in_window_words(message: str) -> str:
    """``message`` with command-line fixes said the window's way."""
    for pattern, replacement in WINDOW_WORDS:
        message = re.sub(pattern, replacement, message)
    return message


def flags_left(message: str) -> list[str]:
    """Flags a message still names outside a whole command (for the test of this module)."""
    return FLAG.findall(COMMAND.sub("", message))
