"""What the code's shape promises, read from its syntax trees so it cannot drift: the unit of
work is the only place that commits or rolls back, the database is told apart in one place
(the engine's backend), no module imports another's private name, and the formatter lays out
every statement (no `fmt: skip`)."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tests.support import ROOT

PACKAGE = ROOT / "codemojex"


def _modules() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        yield str(path.relative_to(ROOT)), ast.parse(path.read_text(), str(path))


def _calls_to(tree: ast.Module, names: set[str]) -> list[int]:
    """The lines that call a method of one of these names (`x.commit()`)."""
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in names
    ]


def test_only_the_unit_of_work_commits_or_rolls_back() -> None:
    found = {
        where: lines
        for where, tree in _modules()
        if (lines := _calls_to(tree, {"commit", "rollback"}))
    }
    assert found.keys() == {"codemojex/db/unit.py"}, found


def test_the_database_is_told_apart_in_one_place() -> None:
    """Which database a connection talks to is asked once, where the engine is built (it
    picks the store backend): never per call."""
    asked = {
        where
        for where, tree in _modules()
        for node in ast.walk(tree)
        if (isinstance(node, ast.Attribute) and node.attr in {"dialect", "get_backend_name"})
        or (isinstance(node, ast.Name) and node.id == "dialect")
        or (isinstance(node, ast.Compare) and _names_a_dialect(node))
    }
    assert asked == {"codemojex/db/engine.py"}, asked


def _names_a_dialect(node: ast.Compare) -> bool:
    """`… == "sqlite"` or `… == "postgresql"`: a comparison with a database's name."""
    values = [node.left, *node.comparators]
    return any(isinstance(v, ast.Constant) and v.value in {"sqlite", "postgresql"} for v in values)


def test_no_module_imports_a_private_name_of_another() -> None:
    private = [
        f"{where}:{node.lineno} {node.module}.{alias.name}"
        for where, tree in _modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("codemojex")
        for alias in node.names
        if alias.name.startswith("_")
    ]
    assert private == []


def test_the_formatter_lays_out_every_statement() -> None:
    """No statement kept out of the formatter's layout (a data table between `fmt: off` and
    `fmt: on` may keep its columns)."""
    skipped = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), start=1)
        if "fmt: skip" in line
    ]
    assert skipped == []
