"""The engine must stay Qt-free so the CLI and headless servers never pull in a GUI toolkit."""

import ast
from pathlib import Path

ENGINE = Path(__file__).resolve().parents[1] / "app" / "engine"
QT_PACKAGES = ("PySide6", "PyQt5", "PyQt6", "shiboken6", "qtpy")


def _imported_roots(source: str) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def test_engine_never_imports_qt() -> None:
    modules = sorted(ENGINE.rglob("*.py"))
    assert modules, "the engine package has no modules"
    offenders = {
        str(path.relative_to(ENGINE)): sorted(_imported_roots(path.read_text()) & set(QT_PACKAGES))
        for path in modules
    }
    assert {path: qt for path, qt in offenders.items() if qt} == {}


def test_import_check_sees_qt_imports() -> None:
    assert _imported_roots("from PySide6.QtCore import QObject\nimport numpy") == {
        "PySide6",
        "numpy",
    }
