"""Work too heavy for the event loop — decoding a request's JSON, compiling its schemas, reading
its tools — runs on a few checking threads, within a time budget.

Why: everything on the event loop delays every other client, ``/health`` included; a forced tool
call over 10,000 tools held it for 7 s. The request limits (:mod:`.config`) keep each check well
under a second; the budget (:data:`~.config.CHECK_SECONDS`) is the backstop: past it the request
is refused with a 400 naming it (the thread finishes on its own, as a thread cannot be stopped).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from app.engine.server.core.api_errors import ApiError

CHECKING_THREADS = 2
T = TypeVar("T")


class Offloader:
    def __init__(self, budget_seconds: float) -> None:
        self._budget = budget_seconds
        self._pool = ThreadPoolExecutor(CHECKING_THREADS, thread_name_prefix="mtp-studio-check")

    async def run(self, work: Callable[[], T]) -> T:
        """``work()``'s result (or exception), computed on a checking thread."""
        future = asyncio.get_running_loop().run_in_executor(self._pool, work)
        try:
            return await asyncio.wait_for(future, self._budget)
        except TimeoutError:
            raise ApiError(
                400,
                f"checking this request took longer than {self._budget:g} s (its JSON schemas or "
                "tools are too complex): send simpler schemas or fewer tools",
                code="request_too_complex",
            ) from None

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
