"""The request-field tables, walked against a running server: every field of every API is
honoured (the reply changes as the table says), refused with a 400 naming it, or accepted and
ignored on purpose (the reply is the same as without it) — and the tables in
docs/server-api.md#request-fields are the ones the server uses.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.engine.server.core.field_rules import HONOURED, IGNORED, REFUSED, RUNTIME_PENDING
from tests.server.conversation_checks import check_for
from tests.server.field_checks import (
    ENDPOINTS,
    IGNORED_SAMPLES,
    Endpoint,
    markdown_table,
    refused_sample,
)
from tests.server.honoured_checks import refused
from tests.server.server_process import ServerProcess

pytestmark = pytest.mark.slow

DOCS = Path(__file__).resolve().parents[2] / "docs" / "server-api.md"


def _fields(treatments: tuple[str, ...]) -> list[tuple[Endpoint, str]]:
    return [
        (endpoint, name)
        for endpoint in ENDPOINTS
        for name, rule in endpoint.table.items()
        if rule.treatment in treatments
    ]


def _ids(cases: list[tuple[Endpoint, str]]) -> list[str]:
    return [f"{endpoint.key}-{name}" for endpoint, name in cases]


HONOURED_FIELDS = _fields((HONOURED,))
REFUSED_FIELDS = _fields((REFUSED, RUNTIME_PENDING))
IGNORED_FIELDS = _fields((IGNORED,))


def _documented(title: str) -> str:
    text = DOCS.read_text(encoding="utf-8")
    section = text.split("## Request fields", 1)[1].split("\n## ", 1)[0]
    heading = f"### {title}\n"
    assert heading in section, f"docs/server-api.md#request-fields has no '### {title}'"
    table = section.split(heading, 1)[1].split("\n### ", 1)[0]
    return "\n".join(line for line in table.splitlines() if line.startswith("|"))


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=[endpoint.key for endpoint in ENDPOINTS])
def test_the_documented_table_is_the_one_the_server_uses(endpoint: Endpoint) -> None:
    expected = markdown_table(endpoint)
    assert _documented(endpoint.title) == expected, f"write this table:\n{expected}"


@pytest.mark.parametrize(("endpoint", "name"), HONOURED_FIELDS, ids=_ids(HONOURED_FIELDS))
def test_an_honoured_field_changes_the_reply_as_the_table_says(
    server: ServerProcess, endpoint: Endpoint, name: str
) -> None:
    check = check_for(endpoint, name)
    assert check is not None, f"no check shows what '{name}' does on {endpoint.path}"
    check(endpoint, server)


@pytest.mark.parametrize(("endpoint", "name"), REFUSED_FIELDS, ids=_ids(REFUSED_FIELDS))
def test_a_refused_field_is_a_400_naming_it(
    server: ServerProcess, endpoint: Endpoint, name: str
) -> None:
    message = refused(endpoint, server, name, **{name: refused_sample(endpoint, name)})
    rule = endpoint.table[name]
    assert rule.says in message
    if rule.treatment == RUNTIME_PENDING:
        assert "not supported yet" in message


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=[endpoint.key for endpoint in ENDPOINTS])
def test_the_values_of_refused_fields_that_ask_for_nothing_are_accepted(
    server: ServerProcess, endpoint: Endpoint
) -> None:
    """What clients send by default (``n: 1``, ``logprobs: false``, penalties of 0 …)."""
    neutral = {
        name: rule.neutral[-1]
        for name, rule in endpoint.table.items()
        if rule.treatment in (REFUSED, RUNTIME_PENDING) and len(rule.neutral) > 1
    }
    assert endpoint.post(server, **neutral).status_code == 200
    nulls = {name: None for name, _rule in endpoint.table.items() if name not in endpoint.base}
    assert endpoint.post(server, **nulls).status_code == 200


@pytest.mark.parametrize(("endpoint", "name"), IGNORED_FIELDS, ids=_ids(IGNORED_FIELDS))
def test_an_ignored_field_is_accepted_and_changes_nothing(
    server: ServerProcess, endpoint: Endpoint, name: str
) -> None:
    value = IGNORED_SAMPLES[name]
    if endpoint.key == "count_tokens":
        counted = endpoint.reply(server)["input_tokens"]
        assert endpoint.reply(server, **{name: value})["input_tokens"] == counted
        return
    assert endpoint.say(server, **{name: value}) == endpoint.say(server)


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=[endpoint.key for endpoint in ENDPOINTS])
def test_a_field_no_table_lists_is_a_400_naming_it(
    server: ServerProcess, endpoint: Endpoint
) -> None:
    message = refused(endpoint, server, "temprature", temprature=0.2)
    assert re.search(r"'temprature' is not a field of .* that this server knows", message)
