"""Which model a request's ``model`` names: an alias, the exact id, or a unique short name.

Clients send whatever name they were configured with — Claude Code its own ``claude-…`` names,
agents a model id copied from ``/v1/models``, people the short name they remember. So a name is
looked up, in order, among the aliases (``serve --alias``: shell-style patterns, ``claude-*``),
the ids (exactly), then the ids and short names without regard to case. A name no model has is
not answered by another model: the :class:`Resolution` says why, for the API's 404
(docs/server-api.md#models).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass

from app.engine.errors import ServerError
from app.engine.server.models.catalogue import Catalogue, ServableModel

NOT_FOUND = "not_found"
AMBIGUOUS = "ambiguous"
MISSING = "missing"
LISTED_IN_ERRORS = 12
"""How many model ids a not-found message lists (then "and N more")."""


@dataclass(frozen=True)
class Alias:
    """``pattern`` (a name, or a shell-style pattern such as ``claude-*``) answered by the model
    ``target`` names (None: the one model a pinned server runs)."""

    pattern: str
    target: str | None = None

    def matches(self, name: str) -> bool:
        return fnmatch.fnmatchcase(name, self.pattern)


def parse_alias(text: str) -> Alias:
    """``NAME`` or ``NAME=MODEL`` as ``serve --alias`` takes it."""
    pattern, separator, target = text.partition("=")
    if not pattern.strip() or (separator and not target.strip()):
        raise ServerError(
            f"--alias {text!r} is invalid: use NAME (another name for the --model served) or "
            "NAME=MODEL (a name, or a pattern such as 'claude-*', answered by MODEL)"
        )
    return Alias(pattern.strip(), target.strip() if separator else None)


@dataclass(frozen=True)
class Resolution:
    """The model a name picks, or why none: ``problem`` is :data:`NOT_FOUND`,
    :data:`AMBIGUOUS` or :data:`MISSING` and ``message`` says it to the client."""

    model: ServableModel | None
    problem: str | None = None
    message: str = ""


def resolve(
    name: str | None,
    catalogue: Catalogue,
    aliases: Sequence[Alias] = (),
    *,
    pinned: bool = False,
) -> Resolution:
    """The model ``name`` picks in ``catalogue``. A pinned server's one model answers a request
    that names none; a library server needs a name."""
    if name is None:
        if pinned and catalogue.models:
            return Resolution(catalogue.models[0])
        return Resolution(None, MISSING, _missing_message(catalogue))
    for alias in aliases:
        if alias.matches(name):
            if alias.target is None:
                return Resolution(catalogue.models[0]) if catalogue.models else _not_found(name)
            found = _lookup(alias.target, catalogue)
            if found.model is not None or found.problem == AMBIGUOUS:
                return found
            return Resolution(
                None,
                NOT_FOUND,
                f"The alias {alias.pattern!r} names the model {alias.target!r}, which this "
                f"server does not have. {_available(catalogue)}",
            )
    found = _lookup(name, catalogue)
    if found.model is None and found.problem == NOT_FOUND:
        return _not_found(name, catalogue, pinned=pinned)
    return found


def _lookup(name: str, catalogue: Catalogue) -> Resolution:
    exact = catalogue.by_id(name)
    if exact is not None:
        return Resolution(exact)
    folded = name.casefold()
    matches = [
        model
        for model in catalogue.models
        if any(candidate.casefold() == folded for candidate in (model.id, *model.names))
    ]
    if len(matches) == 1:
        return Resolution(matches[0])
    if matches:
        ids = ", ".join(model.id for model in matches[:LISTED_IN_ERRORS])
        return Resolution(
            None,
            AMBIGUOUS,
            f"The model name {_quoted(name)} fits {len(matches)} models: {ids}. Send one of "
            "these ids.",
        )
    return Resolution(None, NOT_FOUND)


def _not_found(
    name: str, catalogue: Catalogue | None = None, *, pinned: bool = False
) -> Resolution:
    if catalogue is None:
        return Resolution(None, NOT_FOUND, f"The model {_quoted(name)} does not exist.")
    for unservable, why in catalogue.unservable:
        if unservable.casefold() == name.casefold():
            return Resolution(
                None,
                NOT_FOUND,
                f"The model {_quoted(name)} is on disk but cannot run here: {why}",
            )
    if pinned and catalogue.models:
        served = catalogue.models[0].id
        return Resolution(
            None,
            NOT_FOUND,
            f"The model {_quoted(name)} does not exist: this server runs one model, {served} "
            f"(serve --model). Send model {served!r}, start the server with --alias "
            f"{_quoted(name)} to answer that name too, or without --model to serve every model "
            "on disk.",
        )
    return Resolution(
        None,
        NOT_FOUND,
        f"The model {_quoted(name)} does not exist on this server. {_available(catalogue)}",
    )


def _missing_message(catalogue: Catalogue) -> str:
    return f"'model' is required: this server runs every model on disk. {_available(catalogue)}"


def _available(catalogue: Catalogue) -> str:
    if not catalogue.models:
        return (
            "It has no model: download one (mtp-studio get) or put a .gguf file in the models "
            "folder."
        )
    ids = list(catalogue.ids)
    listed = ", ".join(ids[:LISTED_IN_ERRORS])
    more = f" and {len(ids) - LISTED_IN_ERRORS} more" if len(ids) > LISTED_IN_ERRORS else ""
    return f"It serves: {listed}{more} (GET /v1/models lists them)."


def _quoted(name: str) -> str:
    """A client's name, cut short and without control characters, in quotes."""
    cleaned = "".join(c if c.isprintable() else "?" for c in name[:80])
    return f"'{cleaned}{'…' if len(name) > 80 else ''}'"
