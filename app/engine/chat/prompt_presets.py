"""System-prompt presets: a few that ship with the app, and the ones the user saves.

A preset is a named system prompt the user starts a conversation from (choosing one fills the
conversation's system prompt, which the conversation then keeps as its own). The user's presets
live in the chat history's preferences (one JSON object of name → text), so they travel with the
history and need no file of their own; the shipped ones cannot be deleted, and a saved preset
with a shipped one's name replaces it in the list.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from app.engine.chat.history import HistoryError, HistoryStore

PREFERENCE = "system_prompt_presets"
SHIPPED: tuple[tuple[str, str], ...] = (
    ("Helpful assistant", "You are a helpful assistant. Answer clearly and accurately."),
    ("Concise", "Answer in as few words as the question allows. No preamble, no summary."),
    (
        "Coding assistant",
        "You are an expert programmer. Answer with working code in fenced blocks, then a short "
        "explanation of what it does and why.",
    ),
    (
        "Explain simply",
        "Explain like a patient teacher: plain words, one idea at a time, an example for each.",
    ),
    (
        "Translator",
        "Translate the user's text into English, keeping its tone and formatting. Reply with the "
        "translation only.",
    ),
)
MAX_NAME = 60


@dataclass(frozen=True)
class Preset:
    name: str
    text: str
    shipped: bool


class PromptPresets:
    """The presets of one history store."""

    def __init__(self, store: HistoryStore) -> None:
        self._store = store

    def all(self) -> list[Preset]:
        """The user's presets, then the shipped ones not replaced by a preset of theirs."""
        saved = self._saved()
        shipped = [Preset(name, text, True) for name, text in SHIPPED if name not in saved]
        return [Preset(name, text, False) for name, text in sorted(saved.items())] + shipped

    def save(self, name: str, text: str) -> None:
        name = name.strip()
        if not name:
            raise HistoryError("a preset needs a name; type at least one character")
        if len(name) > MAX_NAME:
            raise HistoryError(f"a preset's name has at most {MAX_NAME} characters")
        if not text.strip():
            raise HistoryError("the system prompt is empty: type the prompt to save first")
        saved = self._saved()
        saved[name] = text.strip()
        self._store.set_preference(PREFERENCE, json.dumps(saved))

    def delete(self, name: str) -> None:
        saved = self._saved()
        if saved.pop(name, None) is not None:
            self._store.set_preference(PREFERENCE, json.dumps(saved))

    def _saved(self) -> dict[str, str]:
        raw = self._store.preference(PREFERENCE)
        try:
            saved = json.loads(raw) if raw else {}
        except ValueError:
            return {}  # a damaged entry loses the user's presets, never the history
        if not isinstance(saved, dict):
            return {}
        return {str(name): str(text) for name, text in saved.items()}
