"""Stop sequences (OpenAI's ``stop``, Anthropic's ``stop_sequences``) over streamed text.

The runtime stops only at the model's end-of-generation token, so the server watches the text:
it releases text as soon as it can no longer be the start of a stop sequence, and at a match
drops the sequence and everything after it (neither API returns the stop text); :attr:`matched`
says which sequence ended the text (Anthropic's ``stop_sequence``).

The scan runs on the event loop for every piece of text, so its cost must not grow with the
length of the stop strings: each string keeps its Knuth–Morris–Pratt state (how much of it the
text ends with), advanced over the new characters only, instead of comparing every prefix of
every string with the text's end (which froze the server for 120 s on 700 strings of 10 KB).
The request limits (:data:`~.config.MAX_STOP_STRINGS`, :data:`~.config.MAX_STOP_CHARACTERS`)
bound the rest.
"""

from __future__ import annotations


class StopScanner:
    """Feed streamed text; :meth:`feed` returns what may be sent now; :attr:`matched` is the
    stop sequence found (None until one is)."""

    def __init__(self, stops: tuple[str, ...]) -> None:
        self._stops = stops
        self._fallbacks = [_fallbacks(stop) for stop in stops]
        self._matched_lengths = [0] * len(stops)
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
        for index, stop in enumerate(self._stops):
            self._matched_lengths[index] = _advance(
                stop, self._fallbacks[index], self._matched_lengths[index], text
            )
        hold = max(self._matched_lengths, default=0)
        released = self._pending[: len(self._pending) - hold]
        self._pending = self._pending[len(self._pending) - hold :]
        return released

    def flush(self) -> str:
        """The held-back text at the end of the generation (no stop sequence followed it)."""
        released, self._pending = ("" if self.stopped else self._pending), ""
        return released


def _fallbacks(stop: str) -> list[int]:
    """KMP's failure function: for each prefix of ``stop``, the length of its longest proper
    prefix that is also its suffix."""
    fallbacks = [0] * len(stop)
    length = 0
    for index in range(1, len(stop)):
        while length and stop[index] != stop[length]:
            length = fallbacks[length - 1]
        if stop[index] == stop[length]:
            length += 1
        fallbacks[index] = length
    return fallbacks


def _advance(stop: str, fallbacks: list[int], matched: int, text: str) -> int:
    """How much of ``stop`` the text ends with after ``text`` follows a text that ended with its
    first ``matched`` characters (never all of it: a whole match was found by the caller)."""
    for character in text:
        while matched and stop[matched] != character:
            matched = fallbacks[matched - 1]
        if stop[matched] == character:
            matched += 1
        if matched == len(stop):
            matched = fallbacks[matched - 1]
    return matched
