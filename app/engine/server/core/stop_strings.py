"""Stop sequences (OpenAI's ``stop``, Anthropic's ``stop_sequences``) over streamed text.

The runtime stops only at the model's end-of-generation token, so the server watches the text:
it releases text as soon as it can no longer be the start of a stop sequence, and at a match
drops the sequence and everything after it (neither API returns the stop text); :attr:`matched`
says which sequence ended the text (Anthropic's ``stop_sequence``).
"""

from __future__ import annotations


class StopScanner:
    """Feed streamed text; :meth:`feed` returns what may be sent now; :attr:`matched` is the
    stop sequence found (None until one is)."""

    def __init__(self, stops: tuple[str, ...]) -> None:
        self._stops = stops
        self._pending = ""
        self.matched: str | None = None

    @property
    def stopped(self) -> bool:
        return self.matched is not None

    def feed(self, text: str) -> str:
        if self.stopped:
            return ""
        self._pending += text
        found = [(at, stop) for stop in self._stops if (at := self._pending.find(stop)) >= 0]
        if found:
            at, self.matched = min(found, key=lambda match: match[0])
            released, self._pending = self._pending[:at], ""
            return released
        hold = self._longest_partial_match()
        released = self._pending[: len(self._pending) - hold]
        self._pending = self._pending[len(self._pending) - hold :]
        return released

    def flush(self) -> str:
        """The held-back text at the end of the generation (no stop sequence followed it)."""
        released, self._pending = ("" if self.stopped else self._pending), ""
        return released

    def _longest_partial_match(self) -> int:
        """How many trailing characters could still begin a stop sequence."""
        longest = 0
        for stop in self._stops:
            for size in range(min(len(stop) - 1, len(self._pending)), longest, -1):
                if self._pending.endswith(stop[:size]):
                    longest = size
                    break
        return longest
