"""The server's MTP depth setting — ``auto`` or a fixed K — and what it asks of the runtime.

``serve --mtp-depth`` and a request's ``mtp_depth`` extension take the values ``chat`` takes:
``auto`` (the default: the worker chooses each cycle's depth, 0 to ``AUTO_MAX_DEPTH``, from
what it has measured, and keeps what it learnt per model and machine) or a whole number
0..``MAX_DRAFT_DEPTH`` (0 = plain decoding). Replies say which ran: their ``mtp`` object's
``depth`` is ``"auto"`` or K.
"""

from __future__ import annotations

from app.engine.errors import ServerError
from app.engine.runtime.core.request import MAX_DRAFT_DEPTH
from app.engine.runtime.core.stats import DecodeStats
from app.engine.runtime.speculative.depth_policy import AUTO, AUTO_MAX_DEPTH

DepthSetting = int | str
"""``AUTO`` or a fixed depth."""


def allowed_depths(max_depth: int = MAX_DRAFT_DEPTH) -> str:
    """The accepted values, as error messages and help texts spell them."""
    return f'"{AUTO}" or a whole number 0 (plain decoding) to {max_depth}'


def check_depth_setting(setting: DepthSetting) -> None:
    """Raise a :class:`ServerError` naming ``--mtp-depth`` unless ``setting`` is valid."""
    if setting == AUTO:
        return
    if isinstance(setting, bool) or not isinstance(setting, int):
        raise ServerError(f"--mtp-depth {setting!r} is invalid: use {allowed_depths()}")
    if not 0 <= setting <= MAX_DRAFT_DEPTH:
        raise ServerError(f"--mtp-depth {setting} is invalid: use {allowed_depths()}")


def deepest(setting: DepthSetting) -> int:
    """The most tokens a cycle may draft under ``setting`` (auto: ``AUTO_MAX_DEPTH``)."""
    return AUTO_MAX_DEPTH if setting == AUTO else int(setting)


def reported_depth(stats: DecodeStats) -> int | str:
    """What a reply's ``depth`` says: ``"auto"`` when the depth adapted, else the fixed one."""
    return AUTO if stats.adaptive else stats.depth
