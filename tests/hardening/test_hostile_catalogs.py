"""Issue 23: a hostile catalog YAML is one clear line and exit 2, in well under a second.

Run through the real CLI (``catalog validate --catalog FILE``): an alias bomb (was over 60 s and
gigabytes), flow nesting 5 000 deep (a minute, then a ``RecursionError``), block nesting past
Python's recursion limit (a traceback), an oversized file, and a
valid YAML line of only a dash that ruamel's indentation guess tripped on. Then a fuzz target
feeds the reader random YAML-ish text: a catalog or a :class:`CatalogError`, nothing else.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.cli import main
from app.engine.catalog.yaml_limits import MAX_CATALOG_BYTES
from app.engine.catalog.yamlfile import CatalogFile
from app.engine.errors import CatalogError
from tests.hardening.test_header_fuzz import FUZZ

ENTRY = "models:\n  - key: a\n    repo: org/a\n"


def _alias_bomb() -> str:
    lines = ['a0: &a0 ["x","x","x","x","x","x","x","x","x"]']
    for level in range(1, 9):
        lines.append(f"a{level}: &a{level} [{','.join([f'*a{level - 1}'] * 9)}]")
    return "\n".join(lines) + "\nmodels:\n  - key: bomb\n    repo: *a8\n"


def _block_nesting(levels: int) -> str:
    return "models:\n  " + "- " * levels + "a\n"  # compact block sequences: [[[…]]]


CASES = {
    "alias bomb": (_alias_bomb(), r"its aliases expand to more than 250000 values"),
    "flow nesting": ("models: " + "[" * 5000 + "]" * 5000 + "\n", r"line 1 nests \[ or \{ deeper"),
    "block nesting past recursion": (_block_nesting(1500), r"nests deeper than 64 levels"),
    "block nesting of 100": (_block_nesting(100), r"nests deeper than 64 levels"),
    "oversized": (ENTRY + "#" * MAX_CATALOG_BYTES, r"larger than the 262144 bytes"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_hostile_catalog_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture, case: str
) -> None:
    text, message = CASES[case]
    path = tmp_path / "catalog.yaml"
    path.write_text(text)
    started = time.perf_counter()
    assert main(["catalog", "validate", "--catalog", str(path)]) == 2
    assert time.perf_counter() - started < 10
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and str(path) in error
    assert re.search(message, error), error


def test_a_line_of_only_a_dash_is_read(tmp_path: Path) -> None:
    path = tmp_path / "catalog.yaml"
    path.write_text("models:\n  -\n")
    assert CatalogFile.read(path).structure_problems()


def test_anchors_used_a_few_times_still_work(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "catalog.yaml"
    path.write_text(
        "defaults: &tags [chat, mtp]\nmodels:\n  - key: a\n    repo: org/a\n    tags: *tags\n"
    )
    main(["catalog", "validate", "--catalog", str(path)])
    assert "refused" not in capsys.readouterr().err


yaml_text = st.text(
    alphabet=st.sampled_from(list("models:-&*ab[]{}, \n'\"#!|>?%@`0\t")), max_size=400
)


@FUZZ
@given(text=yaml_text)
def test_random_yaml_is_a_catalog_or_a_catalog_error(tmp_path_factory, text: str) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "catalog.yaml"
    path.write_text(text)
    try:
        catalog_file = CatalogFile.read(path)
    except CatalogError as exc:
        assert "\n" not in str(exc).rstrip() or "not valid YAML" in str(exc)
        return
    catalog_file.structure_problems()
