"""The demo model's training text: docstring → code chat pairs cut from Python's standard library.

Nothing can be downloaded here, yet the demo model must chat about something useful out of the
box. Every Python installation ships the same corpus — its standard library — so the pairs are
rebuilt from the running interpreter's own sources, deterministically: files in sorted order,
functions in source order, the held-out split decided by a hash of each file's relative path (never
by chance), so a user with the same Python version gets byte-identical text.

A pair asks for a function by its docstring and answers with the function's code (docstring
removed, since the request already says it), fenced as Python — what a user of the chat window
would ask and expect back.
"""

from __future__ import annotations

import ast
import hashlib
import sys
import sysconfig
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

# Directories of the standard library that hold tests, data or vendored packages, not library code.
EXCLUDED_DIRS = frozenset(
    {"test", "tests", "idle_test", "site-packages", "__pycache__", "lib2to3", "turtledemo"}
)
MAX_REQUEST_CHARS = 600
MAX_CODE_CHARS = 1500
MIN_DOCSTRING_CHARS = 20
HELD_OUT_EVERY = 40  # one file in 40 (by path hash) is held out for evaluation


@dataclass(frozen=True)
class ChatPair:
    """One request (the docstring) and its answer (the function's code), with where it came from."""

    source: str  # "<relative path>:<line>"
    request: str
    answer: str


@dataclass(frozen=True)
class Corpus:
    """The training and held-out pairs, plus a digest that identifies the exact text."""

    train: tuple[ChatPair, ...]
    held_out: tuple[ChatPair, ...]
    sha256: str
    python_version: str


def stdlib_root() -> Path:
    """The running interpreter's standard library directory."""
    return Path(sysconfig.get_paths()["stdlib"])


def is_held_out(relative_path: str) -> bool:
    """Whether a file belongs to the held-out split (decided by its path, never by chance)."""
    digest = hashlib.sha256(relative_path.encode()).digest()
    return int.from_bytes(digest[:4], "big") % HELD_OUT_EVERY == 0


def _library_files(root: Path) -> Iterator[Path]:
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        if not EXCLUDED_DIRS.intersection(relative.parts[:-1]):
            yield path


def _request_text(docstring: str) -> str:
    """The docstring's leading paragraphs, up to MAX_REQUEST_CHARS, cut at a paragraph break."""
    paragraphs = [p.strip() for p in docstring.strip().split("\n\n") if p.strip()]
    kept: list[str] = []
    for paragraph in paragraphs:
        if kept and sum(len(p) + 2 for p in kept) + len(paragraph) > MAX_REQUEST_CHARS:
            break
        kept.append(paragraph)
    return "\n\n".join(kept)[:MAX_REQUEST_CHARS]


def _function_lines(lines: list[str], node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    return lines[first - 1 : node.end_lineno]


def _code_without_docstring(lines: list[str], node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    docstring_node = node.body[0]
    docstring_end = docstring_node.end_lineno or docstring_node.lineno
    head = lines[first - 1 : docstring_node.lineno - 1]
    body = lines[docstring_end : node.end_lineno]
    while body and not body[0].strip():
        body = body[1:]  # the blank line that usually follows a docstring
    return textwrap.dedent("\n".join(head + body)).strip("\n")


def _docstring_pair(
    lines: list[str], node: ast.FunctionDef | ast.AsyncFunctionDef, docstring: str
) -> tuple[str, str] | None:
    """Request = the docstring; answer = the code without it."""
    if len(docstring) < MIN_DOCSTRING_CHARS or len(node.body) < 2:
        return None
    first_code_line = node.body[1].lineno
    if not node.lineno < node.body[0].lineno <= (node.body[0].end_lineno or 0) < first_code_line:
        return None  # the docstring shares a line with code: it cannot be cut out by lines
    return _request_text(docstring), _code_without_docstring(lines, node)


def _signature_pair(
    lines: list[str], node: ast.FunctionDef | ast.AsyncFunctionDef
) -> tuple[str, str] | None:
    """Request = the function's signature (for functions without a docstring); answer = its code."""
    if node.body[-1].end_lineno == node.lineno:
        return None  # a one-liner: nothing to write beyond the signature
    prefix = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
    request = f"Write the Python function `{prefix} {node.name}({ast.unparse(node.args)})`."
    return request, textwrap.dedent("\n".join(_function_lines(lines, node))).strip("\n")


def pairs_from_source(source: str, relative_path: str) -> Iterator[ChatPair]:
    """Every function as a request/answer pair: asked for by its docstring, else its signature."""
    lines = source.splitlines()
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        docstring = ast.get_docstring(node, clean=True)
        if docstring is None:
            pair = _signature_pair(lines, node)
        else:
            pair = _docstring_pair(lines, node, docstring)
        if pair is None or len(pair[1]) > MAX_CODE_CHARS or "\t" in pair[1]:
            continue
        request, code = pair
        yield ChatPair(
            source=f"{relative_path}:{node.lineno}",
            request=request,
            answer=f"```python\n{code}\n```",
        )


def build_corpus(root: Path | None = None) -> Corpus:
    """All pairs of the stdlib at ``root`` (default: this interpreter's), split by file."""
    root = root or stdlib_root()
    train: list[ChatPair] = []
    held_out: list[ChatPair] = []
    digest = hashlib.sha256()
    for path in _library_files(root):
        relative = path.relative_to(root).as_posix()
        try:
            source = path.read_text(encoding="utf-8")
            pairs = list(pairs_from_source(source, relative))
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue  # a few stdlib files are deliberately invalid or not UTF-8
        (held_out if is_held_out(relative) else train).extend(pairs)
        for pair in pairs:
            digest.update(f"{pair.source}\0{pair.request}\0{pair.answer}\0".encode())
    return Corpus(
        train=tuple(train),
        held_out=tuple(held_out),
        sha256=digest.hexdigest(),
        python_version=".".join(map(str, sys.version_info[:3])),
    )
