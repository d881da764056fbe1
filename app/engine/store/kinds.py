"""Turns a stored :class:`JobSpec` back into a runnable job, so any listed job can be retried.

Each kind names the factory that builds its job from the spec's JSON parameters; factories are
imported only when used, so the store does not pull every engine area in at start-up.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from app.engine.errors import MtpStudioError
from app.engine.jobs import JobContext
from app.engine.store.records import JobSpec

JobFunction = Callable[[JobContext], object]

FACTORIES: dict[str, str] = {
    "download": "app.engine.download.job:download_job_from_params",
    "graft": "app.engine.graft.job:graft_job_from_params",
    "publish": "app.engine.hub.job:publish_job_from_params",
    "download_graft": "app.engine.graft.download_job:download_graft_job_from_params",
    "get": "app.engine.hub.get:get_job_from_params",
    "convert": "app.engine.convert.job:convert_job_from_params",
}


@runtime_checkable
class Pausable(Protocol):
    """A job that can hold still without giving up its connection state (e.g. a download)."""

    def pause(self) -> None: ...

    def resume(self) -> None: ...

    @property
    def paused(self) -> bool: ...


def build_job(spec: JobSpec) -> JobFunction:
    """The job for ``spec``; an unknown kind is an error saying which kinds exist."""
    target = FACTORIES.get(spec.kind)
    if target is None:
        raise MtpStudioError(
            f"job kind {spec.kind!r} cannot be run by this version; known kinds: "
            f"{', '.join(sorted(FACTORIES))}"
        )
    module_name, _, factory_name = target.partition(":")
    factory = getattr(importlib.import_module(module_name), factory_name)
    return factory(spec.params)
