"""Stops drafting on a backend whose drafts are garbage, and says why.

A backend can compute the MTP head wrongly and still decode correctly: verification rejects every
bad draft, so the output stays exact and the only symptom is the time lost drafting tokens that
never land (a published Qwen3 MTP run on llama.cpp's Vulkan path measured an acceptance of 0.013 on
a hybrid model). Nothing else would tell the user, so the first drafting cycles of a model file on a
backend are watched: once :data:`JUDGED_AFTER_CYCLES` cycles have drafted, if the share of cycles
whose first draft was kept is below :data:`ACCEPTANCE_FLOOR`, or below :data:`SHARE_OF_ELSEWHERE` of
what the same file keeps on another backend (the first draft's acceptance the adaptive depth saved
there, :mod:`~app.engine.runtime.speculative.depth_memory`), drafting stops for that model and
backend, and every reply says why.

The verdict is kept in the app's data folder, keyed like the depth memory (the model file's
identity and the backend's performance fingerprint, which names the llama.cpp build), so a
rebuilt or different backend is judged afresh and a broken one is not retried each session.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.engine.learned_state import read_section, write_section
from app.engine.runtime.speculative import depth_memory

JUDGED_AFTER_CYCLES = 200
"""Drafting cycles watched before the verdict (each contributes its first draft)."""
ACCEPTANCE_FLOOR = 0.05
SHARE_OF_ELSEWHERE = 0.25
ELSEWHERE_MIN_TRIALS = 10.0
"""Saved first-draft trials (decayed counts) another backend needs to be compared with."""
STORE_FILE_NAME = "draft-health.json"
STORE_VERSION = 1
SECTION = "backends"
DRAFTING_STOPPED = "drafting stopped"
"""How every reason starts: bench decode and the model bar look for it in a reply's note."""


@dataclass(frozen=True)
class DraftVerdict:
    """What the watch concluded: ``reason`` is None while drafting is worth it."""

    cycles: int
    kept: int
    reason: str | None

    @property
    def acceptance(self) -> float:
        return self.kept / self.cycles if self.cycles else 0.0


class DraftWatch:
    """The first-draft acceptance of one model file on one backend, until it is judged."""

    def __init__(self, elsewhere: float | None, saved: dict[str, Any] | None = None) -> None:
        self._elsewhere = elsewhere
        self._cycles = int((saved or {}).get("cycles", 0))
        self._kept = int((saved or {}).get("kept", 0))
        reason = (saved or {}).get("reason")
        self.reason: str | None = reason if isinstance(reason, str) else None
        self.changed = False

    @property
    def judged(self) -> bool:
        return self._cycles >= JUDGED_AFTER_CYCLES

    def observe(self, drafted: int, accepted: int) -> None:
        """One speculative cycle: ``drafted`` tokens proposed, ``accepted`` of them kept."""
        if drafted == 0 or self.judged:
            return
        self._cycles += 1
        self._kept += accepted > 0
        self.changed = True
        if self.judged:
            self.reason = self._judge()

    def verdict(self) -> DraftVerdict:
        return DraftVerdict(self._cycles, self._kept, self.reason)

    def to_state(self) -> dict[str, Any]:
        return {"cycles": self._cycles, "kept": self._kept, "reason": self.reason}

    def _judge(self) -> str | None:
        rate = self._kept / self._cycles
        measured = (
            f"{DRAFTING_STOPPED}: the MTP head's first draft was kept in {self._kept} of "
            f"{self._cycles} cycles ({rate:.1%})"
        )
        advice = (
            "this backend likely miscomputes the MTP head; replies run as plain decoding (same "
            "text, no draft cost). Rebuild or switch llama.cpp's backend (e.g. CPU or CUDA "
            "instead of Vulkan) to draft again"
        )
        if rate < ACCEPTANCE_FLOOR:
            return f"{measured}, below the {ACCEPTANCE_FLOOR:.0%} floor: {advice}"
        if self._elsewhere is not None and rate < SHARE_OF_ELSEWHERE * self._elsewhere:
            return (
                f"{measured}, far below the {self._elsewhere:.0%} this model keeps on another "
                f"backend: {advice}"
            )
        return None


class DraftHealth:
    """The watches of the models one worker loads; ``folder`` None keeps verdicts in memory."""

    def __init__(self, folder: Path | None) -> None:
        self._path = folder / STORE_FILE_NAME if folder is not None else None
        self._depth_memory = folder / depth_memory.STORE_FILE_NAME if folder is not None else None
        self._watches: dict[str, DraftWatch] = {}
        self._identities: dict[Path, str] = {}

    def watch(self, model: Path, machine: str) -> DraftWatch:
        """The watch of ``model`` on the backend whose performance fingerprint is ``machine``."""
        identity = self._identities.get(model)
        if identity is None:
            identity = str(model)  # in memory (and a model folder, as MLX loads): its path
            if self._path is not None and model.is_file():
                with contextlib.suppress(OSError):  # unreadable now: kept under its path
                    identity = depth_memory.model_identity(model)
            self._identities[model] = identity
        key = f"{identity}|{machine}"
        watch = self._watches.get(key)
        if watch is None:
            saved = self._read().get(key)
            watch = DraftWatch(
                self._acceptance_elsewhere(identity, machine),
                saved if isinstance(saved, dict) else None,
            )
            self._watches[key] = watch
        return watch

    def save(self) -> None:
        """Write the watches that changed (atomic replace; a no-op in memory)."""
        changed = {key: w for key, w in self._watches.items() if w.changed}
        if self._path is None or not changed:
            return
        entries = self._read()
        for key, watch in changed.items():
            entries[key] = watch.to_state()
            watch.changed = False
        write_section(self._path, STORE_VERSION, SECTION, entries)

    def _read(self) -> dict[str, Any]:
        if self._path is None:
            return {}
        return read_section(self._path, STORE_VERSION, SECTION, "draft verdicts")

    def _acceptance_elsewhere(self, identity: str, machine: str) -> float | None:
        """The best first-draft acceptance the adaptive depth saved for this model file on
        another backend, or None when there is none with enough trials."""
        if self._depth_memory is None:
            return None
        saved = read_section(
            self._depth_memory,
            depth_memory.STORE_VERSION,
            depth_memory.SECTION,
            "adaptive depth",
        )
        rates = []
        for key, state in saved.items():
            parts = key.split("|")
            if len(parts) < 2 or parts[0] != identity or parts[1] == machine:
                continue
            try:
                trials, kept = float(state["trials"][1]), float(state["kept"][1])
            except (KeyError, IndexError, TypeError, ValueError):
                continue
            if trials >= ELSEWHERE_MIN_TRIALS:
                rates.append(kept / trials)
        return max(rates, default=None)
