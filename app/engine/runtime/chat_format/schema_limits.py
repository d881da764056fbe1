"""How big a JSON schema may be before it is compiled, and the stack the compiler runs on.

Why: llguidance compiles a schema by recursion, following each ``$ref`` into its target. On a
default 8 MiB stack a chain of about 2,450 ``$ref`` definitions (88 KB of JSON) overflows it and
the process dies by SIGSEGV — a server for everyone, from one request. A schema's size also
bounds its compile time (a 200,000-member ``enum`` takes seconds). So every schema is measured
first, without recursion, and refused above :data:`MAX_SCHEMA_VALUES` JSON values or
:data:`MAX_SCHEMA_DEPTH` levels of nesting with a message naming the limit; and every compile runs
on a thread with a :data:`COMPILER_STACK_BYTES` stack (:func:`on_compiler_stack`). Measured with
llguidance 1.9 (``bench/hostile_inputs.py``): the deepest recursion a schema within the limits can
cause — a ``$ref`` chain through nested ``properties``, about 1.7 KiB of stack per JSON value —
needs about 34 MiB; 12,000 such links (84,000 values) still compile on the 256 MiB stack.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from app.engine.errors import RuntimeBackendError

MAX_SCHEMA_VALUES = 20_000
"""JSON values (objects, arrays, strings, numbers…) in the schemas of one request, together."""
MAX_SCHEMA_DEPTH = 64
"""Levels of nesting of one schema (llguidance itself stops at 128)."""
COMPILER_STACK_BYTES = 256 * 2**20
"""Reserved address space, not memory: only the pages the recursion touches are used."""

_stack_lock = threading.Lock()
T = TypeVar("T")


def check_schema_size(schemas: Iterable[Any], what: str) -> None:
    """Refuse ``schemas`` (parsed JSON) when together they hold more than
    :data:`MAX_SCHEMA_VALUES` values or one nests deeper than :data:`MAX_SCHEMA_DEPTH`."""
    values = 0
    for schema in schemas:
        pending: list[tuple[Any, int]] = [(schema, 1)]
        while pending:
            value, depth = pending.pop()
            values += 1
            if values > MAX_SCHEMA_VALUES:
                raise RuntimeBackendError(
                    f"{what} is too large: more than {MAX_SCHEMA_VALUES:,} JSON values in its "
                    "schemas; send smaller schemas (fewer definitions, members or tools)"
                )
            if depth > MAX_SCHEMA_DEPTH:
                raise RuntimeBackendError(
                    f"{what} nests deeper than {MAX_SCHEMA_DEPTH} levels; flatten the schema"
                )
            if isinstance(value, dict):
                pending.extend((item, depth + 1) for item in value.values())
            elif isinstance(value, list):
                pending.extend((item, depth + 1) for item in value)


def on_compiler_stack(work: Callable[[], T]) -> T:
    """``work()`` run on a thread with a :data:`COMPILER_STACK_BYTES` stack; its result or its
    exception comes back to the caller."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append((True, work()))
        except BaseException as exc:  # handed to the caller, who raises it
            outcome.append((False, exc))

    with _stack_lock:  # the stack size is process-wide: set it only for this thread's start
        previous = threading.stack_size(COMPILER_STACK_BYTES)
        try:
            thread = threading.Thread(target=run, name="mtp-studio-grammar", daemon=True)
            thread.start()
        finally:
            threading.stack_size(previous)
    thread.join()
    succeeded, value = outcome[0]
    if not succeeded:
        raise value
    return value
