"""What drafts beside the trunk: the small interface the decoding code holds a drafter by.

Today the drafter is the model's own MTP head (:mod:`.mtp_head`), a second context on the same
model. A separate drafter model (Gemma 4's assistant: a second GGUF whose context reads the
target's through ``ctx_other``) is a second implementation of the same interface; the decoding
code (:mod:`.decode`) and the kept states (:mod:`.kept_states`) do not change for it.

Rows: the drafter's row for position p pairs token x_p with the trunk's hidden state h_{p−1}
(docs/architecture.md#the-llamacpp-backend, step 5). The trunk hands over the rows of each committed
token — a prompt's at once, a plain step's or an accepted verify's as they come — and the drafter
decides when to run them; a drafter that keeps no cache of its own (one that reads the target's KV)
may ignore them. Rollback is :meth:`Drafter.keep_first`: the trunk now holds ``length`` tokens."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

import numpy as np

from app.engine.runtime.core.backend import DraftChooser, DraftResult


class Drafter(ABC):
    """Proposes draft tokens for one sequence of a trunk context, kept in step with it."""

    @abstractmethod
    def prompt_rows(self, start: int, tokens: Sequence[int], hidden: np.ndarray) -> None:
        """Rows of a prompt chunk, run now: ``tokens[i]`` at ``start + i`` with ``hidden[i]``
        (h_{start+i−1}; the trunk's rows are only readable until its next decode). Rows handed
        over before are run first. ``tokens`` may be empty: the next row is then ``start``."""

    @abstractmethod
    def commit_rows(self, start: int, tokens: Sequence[int], hidden: Sequence[np.ndarray]) -> None:
        """Rows of committed tokens from ``start`` on (``hidden[i]`` a 1 × width row of
        h_{start+i−1}); rows the drafter already holds are skipped. They may run later, with
        the next draft."""

    @abstractmethod
    def draft(
        self,
        last_token: int,
        hidden: np.ndarray,
        position: int,
        depth: int,
        choose: DraftChooser,
    ) -> DraftResult:
        """Up to ``depth`` drafts after ``last_token`` (at ``position``, paired with the trunk's
        ``hidden`` = h_{position−1}); ``choose`` picks each one or stops. Rows handed over are
        run first; ``depth`` 0 runs only those. The drafts' own rows are dropped afterwards:
        the drafter holds the rows through ``position``."""

    @abstractmethod
    def keep_first(self, length: int) -> bool:
        """The trunk now holds ``length`` tokens: keep what the drafter holds for them (with
        the row at ``length`` when it has it), drop the rest; False when refused."""

    @abstractmethod
    def clear(self) -> None:
        """Hold nothing: the next rows start a prompt from position 0."""

    @abstractmethod
    def state_bytes(self) -> int:
        """Bytes :meth:`copy_state` would take (0: the drafter keeps no state of its own)."""

    @abstractmethod
    def copy_state(self) -> Any:
        """The drafter's whole state, for a saved conversation (None: nothing to keep)."""

    @abstractmethod
    def restore_state(self, state: Any) -> None:
        """Put a state taken by :meth:`copy_state` back; rows handed over since are dropped."""

    @abstractmethod
    def close(self) -> None:
        """Free native resources."""
