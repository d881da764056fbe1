"""A model's measured plain decode speed, so "MTP ×1.8 faster" is a measurement, not a guess.

The speedup shown on a reply is its decode tok/s over the same model's plain decode tok/s on
the same machine. That plain speed comes only from real plain replies: a chat reply decoded
with MTP off (depth 0) or the plain run of Compare. Each counts once it has decoded at least
``MIN_MEASURED_TOKENS`` tokens (a few tokens time mostly noise); the plain speed is the median
of the last ``KEPT_MEASUREMENTS`` such replies, so one reply slowed by another program does not
move it much.

Nothing is measured behind the user's back: an automatic plain run would cost a model's worth
of decoding on every new model (on a laptop, seconds of a busy CPU) and would be timed on a
context unlike the user's; the details under an MTP reply say how to get the figure instead.

The measurements are kept per model file (:func:`model_identity`: size and a hash of its first
MiB, so a renamed copy keeps them) and machine (CPU, cores, host, backend), in one JSON file in
the app's data folder, written to a temporary name and renamed. A file that cannot be read or
parsed is ignored with a log line (the next measurement replaces it): nothing here stops a reply.
"""

from __future__ import annotations

import hashlib
import math
import os
import platform
import statistics
from dataclasses import dataclass
from pathlib import Path

from app.engine.learned_state import cpu_name, read_section, write_section
from app.engine.runtime.core.stats import DecodeStats
from app.engine.runtime.speculative.depth_memory import model_identity

STORE_FILE_NAME = "plain-speed.json"
STORE_VERSION = 1
SECTION = "plain_tokens_per_second"
MIN_MEASURED_TOKENS = 16
KEPT_MEASUREMENTS = 5
BADGE_MIN_SPEEDUP = 1.1
"""Below this a speedup is within the noise of two measurements: no badge."""


@dataclass(frozen=True)
class PlainSpeed:
    """The plain decode speed of a model on this machine and how many replies measured it."""

    tokens_per_second: float
    replies: int


@dataclass(frozen=True)
class Speedup:
    """An MTP reply's decode speed against the model's measured plain speed."""

    reply_tokens_per_second: float
    plain: PlainSpeed

    @property
    def ratio(self) -> float:
        return self.reply_tokens_per_second / self.plain.tokens_per_second

    @property
    def earns_badge(self) -> bool:
        return self.ratio >= BADGE_MIN_SPEEDUP


def speedup(stats: DecodeStats, plain: PlainSpeed | None) -> Speedup | None:
    """The reply's speedup, or None (a plain reply, one too short to time, or no plain
    measure)."""
    if plain is None or stats.depth == 0 or not measurable(stats):
        return None
    return Speedup(stats.decode_tokens_per_second, plain)


def measurable(stats: DecodeStats) -> bool:
    """Long enough for its decode speed to mean something."""
    return stats.generated_tokens >= MIN_MEASURED_TOKENS and stats.decode_tokens_per_second > 0


def speed_key(model: Path, backend: str) -> str:
    """Which model file on which machine and backend a plain speed belongs to.

    A model folder (HF or MLX) is identified by its largest weight file."""
    model = Path(model)
    if model.is_dir():
        weights = sorted(model.glob("*.safetensors"), key=lambda path: path.stat().st_size)
        identity = model_identity(weights[-1]) if weights else f"folder:{model.resolve()}"
    else:
        identity = model_identity(model)
    return f"{identity}|{_machine()}|{backend}"


def _machine() -> str:
    parts = (platform.node(), platform.machine(), cpu_name(), str(os.cpu_count()))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


class PlainSpeedStore:
    """One JSON file: for each speed key, the decode tok/s of its last plain replies."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def in_app_data(cls) -> PlainSpeedStore:
        from app.engine.settings import app_dirs

        return cls(app_dirs().data / STORE_FILE_NAME)

    def plain_speed(self, key: str) -> PlainSpeed | None:
        measured = self._read().get(key)
        if not measured:
            return None
        return PlainSpeed(statistics.median(measured), len(measured))

    def record(self, key: str, stats: DecodeStats) -> bool:
        """Keep ``stats``' decode speed when it is a plain reply long enough to measure."""
        if stats.depth != 0 or not measurable(stats):
            return False
        entries = self._read()
        measured = [*entries.get(key, []), stats.decode_tokens_per_second]
        entries[key] = measured[-KEPT_MEASUREMENTS:]
        self._write(entries)
        return True

    def _write(self, entries: dict[str, list[float]]) -> None:
        write_section(self.path, STORE_VERSION, SECTION, entries)

    def _read(self) -> dict[str, list[float]]:
        entries = read_section(self.path, STORE_VERSION, SECTION, "plain speed")
        return {
            key: [float(value) for value in values if _positive_number(value)]
            for key, values in entries.items()
            if isinstance(values, list)
        }


def _positive_number(value: object) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )
