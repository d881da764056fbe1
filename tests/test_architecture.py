"""The architecture the code promises, checked: the engine stays Qt-free, each package's rooms
import only the rooms below them, and no module imports itself back through a circle.

The rooms and their order are written down in docs/architecture.md; this test is what keeps that
page true. A room may import any room in a lower layer and its own modules, never a room above it
or a peer beside it (peers stay independent so either can change alone).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "app"
ENGINE = APP / "engine"
QT_PACKAGES = ("PySide6", "PyQt5", "PyQt6", "shiboken6", "qtpy")

LAYERS: dict[str, list[set[str]]] = {
    "app.engine.runtime": [
        {"sampling", "chat_format"},
        {"core"},
        {"speculative"},
        {"backends"},
        {"process"},
        {"bench"},
    ],
    "app.engine.server": [{"models"}, {"core"}, {"openai", "anthropic", "responses"}, {"app"}],
    "app.ui.chat": [{"transcript", "widgets"}, {"bridges"}, {"controls"}, {"window"}],
}


SIZE_LIMITED = ("app/engine", "app/commands", "app/ui")
"""Folders whose classes and functions are held to the limits below."""
MAX_CLASS_LINES = 400
MAX_FUNCTION_LINES = 80
SIZE_EXCEPTIONS: dict[str, str] = {}
"""``path:qualified.name`` → why it may be longer (none today)."""


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(source: str, *, top_level_only: bool = False) -> set[str]:
    """Dotted names imported (``from a.b import c`` gives ``a.b`` and ``a.b.c``). With
    ``top_level_only``, just what runs at import time: not inside functions, not under
    ``if TYPE_CHECKING``."""
    tree = ast.parse(source)
    nodes = _import_time_nodes(tree) if top_level_only else list(ast.walk(tree))
    names: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _import_time_nodes(node: ast.AST) -> list[ast.AST]:
    found: list[ast.AST] = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
            found.extend(n for statement in child.orelse for n in _import_time_nodes(statement))
            continue
        found.append(child)
        found.extend(_import_time_nodes(child))
    return found


def _app_modules() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(APP.rglob("*.py"))}


def _room(package: str, module: str) -> str | None:
    if not module.startswith(package + "."):
        return None
    return module[len(package) + 1 :].split(".")[0]


def _layer_of(package: str, room: str) -> int | None:
    for index, rooms in enumerate(LAYERS[package]):
        if room in rooms:
            return index
    return None


@pytest.mark.slow
def test_engine_never_imports_qt() -> None:
    modules = sorted(ENGINE.rglob("*.py"))
    assert modules, "the engine package has no modules"
    offenders = {
        str(path.relative_to(ENGINE)): sorted(
            {name.split(".")[0] for name in _imports(path.read_text())} & set(QT_PACKAGES)
        )
        for path in modules
    }
    assert {path: qt for path, qt in offenders.items() if qt} == {}


def test_engine_never_imports_the_front_ends() -> None:
    offenders = {
        name: sorted(
            i for i in _imports(path.read_text()) if i.startswith(("app.ui", "app.commands"))
        )
        for name, path in _app_modules().items()
        if name.startswith("app.engine")
    }
    assert {name: found for name, found in offenders.items() if found} == {}


@pytest.mark.parametrize("package", sorted(LAYERS))
def test_every_room_has_a_layer(package: str) -> None:
    folder = ROOT.joinpath(*package.split("."))
    rooms = {
        path.stem if path.is_file() else path.name
        for path in folder.iterdir()
        if (path.suffix == ".py" and path.stem != "__init__") or (path / "__init__.py").exists()
    }
    unplaced = {room for room in rooms if _layer_of(package, room) is None}
    assert unplaced == set(), f"add {sorted(unplaced)} to LAYERS[{package!r}] and the docs"


@pytest.mark.parametrize("package", sorted(LAYERS))
def test_rooms_import_only_rooms_below_them(package: str) -> None:
    violations: list[str] = []
    for name, path in _app_modules().items():
        room = _room(package, name)
        if room is None:
            continue
        layer = _layer_of(package, room)
        for imported in _imports(path.read_text()):
            if imported == package:
                violations.append(f"{name} imports the package face {package} (a circle)")
                continue
            other = _room(package, imported)
            if other is None or other == room:
                continue
            other_layer = _layer_of(package, other)
            if other_layer is not None and layer is not None and other_layer >= layer:
                violations.append(f"{name} ({room}) imports {imported} ({other})")
    assert sorted(set(violations)) == []


@pytest.mark.slow
def test_no_import_circles() -> None:
    modules = _app_modules()
    graph = {
        name: {
            target
            for imported in _imports(path.read_text(), top_level_only=True)
            for target in (imported, imported.rsplit(".", 1)[0])
            if target in modules and target != name
        }
        for name, path in modules.items()
    }
    # a package's own __init__ importing its submodules is how packages work, not a circle
    for name in graph:
        graph[name] = {t for t in graph[name] if not name.startswith(t + ".")}
    circles: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                circles.append([*stack[stack.index(target) :], target])
            elif target not in state:
                visit(target)
        stack.pop()
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name)
    assert circles == []


def test_the_checks_see_what_they_check() -> None:
    source = (
        "from PySide6.QtCore import QObject\nimport numpy\n"
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import json\n"
    )
    assert {"PySide6.QtCore", "numpy"} <= _imports(source)
    assert "json" not in _imports(source, top_level_only=True)
    assert _layer_of("app.engine.runtime", "process") > _layer_of("app.engine.runtime", "core")


def test_the_runtime_face_resolves_every_name_it_lists() -> None:
    import app.engine.runtime as runtime

    missing = [name for name in runtime.__all__ if getattr(runtime, name, None) is None]
    assert missing == []


def _oversized(source: str, path: str) -> list[str]:
    """``path:qualified.name (N lines)`` of every class over :data:`MAX_CLASS_LINES` and every
    function or method over :data:`MAX_FUNCTION_LINES` (docstring included)."""
    found: list[str] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                lines = child.end_lineno - child.lineno + 1
                limit = MAX_CLASS_LINES if isinstance(child, ast.ClassDef) else MAX_FUNCTION_LINES
                if lines > limit:
                    found.append(f"{path}:{name} ({lines} lines)")
                visit(child, f"{name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return found


@pytest.mark.parametrize("folder", SIZE_LIMITED)
@pytest.mark.slow
def test_no_class_or_function_is_over_the_size_limits(folder: str) -> None:
    oversized = [
        entry
        for path in sorted((ROOT / folder).rglob("*.py"))
        for entry in _oversized(path.read_text(), str(path.relative_to(ROOT)))
        if entry.split(" (")[0] not in SIZE_EXCEPTIONS
    ]
    assert oversized == [], (
        f"split these (classes ≤ {MAX_CLASS_LINES} lines, functions ≤ {MAX_FUNCTION_LINES}) "
        "or list them in SIZE_EXCEPTIONS with the reason"
    )


def test_the_size_check_sees_nested_functions_and_methods() -> None:
    body = "".join(f"        x{index} = {index}\n" for index in range(MAX_FUNCTION_LINES))
    source = f"class Small:\n    def method(self):\n{body}\ndef outer():\n    def inner():\n{body}"
    found = [entry.split(" (")[0] for entry in _oversized(source, "m.py")]
    assert found == ["m.py:Small.method", "m.py:outer", "m.py:outer.inner"]
    assert _oversized("def short():\n    return 1\n", "m.py") == []
