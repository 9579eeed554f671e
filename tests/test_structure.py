"""What the code's shape promises, read from its syntax trees so it cannot drift: the unit of
work is the only place that begins, commits or rolls back a transaction or makes a savepoint
(by a method call or in SQL), and every store function that writes takes it, the database is
told apart in one place (the engine's backend), no module imports another's private name, and
the formatter lays out every statement (no `fmt: skip`)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from tests.helpers.support import ROOT

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


def test_only_the_unit_of_work_begins_commits_rolls_back_or_makes_a_savepoint() -> None:
    found = {
        where: lines
        for where, tree in _modules()
        if (lines := _calls_to(tree, {"begin", "begin_nested", "commit", "rollback"}))
    }
    assert found.keys() == {"codemojex/db/unit.py"}, found


# A transaction statement spelled in SQL, alone or after another (`text("COMMIT")`).
_TRANSACTION_SQL = re.compile(r"(^|;)\s*(BEGIN|COMMIT|ROLLBACK|SAVEPOINT|RELEASE)\b")


def test_no_module_spells_a_transaction_statement_in_sql() -> None:
    """A `text("COMMIT")` or `exec_driver_sql("SAVEPOINT ...")` would go round the unit as a
    method call cannot. The one spelling allowed is SQLite's begin, in the engine's hook that
    the unit's own begin fires (`engine._sqlite_serialised_writers`)."""
    found = {
        where: sorted(
            node.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and _TRANSACTION_SQL.search(node.value)
        )
        for where, tree in _modules()
    }
    assert {where: spelled for where, spelled in found.items() if spelled} == {
        "codemojex/db/engine.py": ["BEGIN", "BEGIN IMMEDIATE"]
    }


# What a store function calls that writes: an ORM object added, a Core statement built.
_WRITES = {"add", "add_all", "insert", "update", "delete"}
# A module's prepared statement that writes (`_AUDIT_ONCE = text("INSERT ...")`).
_WRITING = re.compile(r"\b(INSERT|UPDATE|DELETE)\b|\b(insert|update|delete)\(")


def test_every_store_function_that_writes_takes_the_unit() -> None:
    """A public function of the store that writes (adds a row, builds an INSERT, UPDATE or
    DELETE, or runs one of the module's prepared statements) takes the unit of work first,
    never a bare session or connection: it can only run inside a transaction a use-case
    opened. The backends' private helpers are given the unit's connection by their methods."""
    wrong = []
    for where, tree in _modules():
        if not where.startswith("codemojex/db/store/"):
            continue
        statements = {
            target.id
            for node in tree.body
            if isinstance(node, ast.Assign) and _WRITING.search(ast.unparse(node.value))
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        for node in tree.body:
            if not isinstance(node, ast.AsyncFunctionDef) or node.name.startswith("_"):
                continue
            called = {
                n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", "")
                for n in ast.walk(node)
                if isinstance(n, ast.Call)
            }
            prepared = {
                n.id for n in ast.walk(node) if isinstance(n, ast.Name) and n.id in statements
            }
            first = node.args.args[0] if node.args.args else None
            takes_unit = (
                first is not None and ast.unparse(first.annotation or ast.Name("")) == "Unit"
            )
            if (called & _WRITES or prepared) and not takes_unit:
                wrong.append(f"{where}: {node.name}")
    assert wrong == []


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


def _bound_names(tree: ast.Module) -> set[str]:
    """The names a module binds itself at its top level (not those it imports)."""
    bound: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            bound |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return bound


def test_every_name_has_one_import_path() -> None:
    """A name is imported from the module that defines it, never through another module that
    imported it (`from codemojex.game.decide import Attempt` would be a second path to
    `codemojex.values.batch.Attempt`). A package's `__init__` may gather its modules' names:
    that is the package's one door (`codemojex.db.store`, `codemojex.usecases`)."""
    modules = {
        ".".join(path.relative_to(ROOT).with_suffix("").parts): ast.parse(path.read_text())
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "__init__.py"
    }
    bound = {name: _bound_names(tree) for name, tree in modules.items()}
    importers = [
        path
        for folder in ("codemojex", "tests", "bench", "migrations")
        for path in sorted((ROOT / folder).rglob("*.py"))
    ]
    through = [
        f"{path.relative_to(ROOT)}:{node.lineno} {node.module}.{alias.name}"
        for path in importers
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom) and node.module in bound
        for alias in node.names
        if alias.name not in bound[node.module]
    ]
    assert not through, "\n".join(through)


# Who reads the settings: the command line and the demo (the composition roots). The process
# mains are handed their parts' configs by the command line: under the settings, which point
# at the bot's, the worker's and the ops page's own defaults, they would close a circle.
_ROOTS = ("codemojex/cli.py", "codemojex/demo/")


def _imports_settings(node: ast.AST) -> bool:
    if isinstance(node, ast.Import):
        return any(alias.name == "codemojex.settings" for alias in node.names)
    if isinstance(node, ast.ImportFrom):
        return node.module == "codemojex.settings" or (
            node.module == "codemojex" and any(a.name == "settings" for a in node.names)
        )
    return False


def test_only_the_composition_roots_read_the_settings() -> None:
    """Settings flow down: no module below the roots imports `codemojex.settings`, even for a
    type (`if TYPE_CHECKING:`), or names `Settings`; each part is built from its own config
    or plain values, which the roots unpack from the settings."""
    found = sorted(
        f"{where}:{node.lineno}"
        for where, tree in _modules()
        if where != "codemojex/settings.py" and not where.startswith(_ROOTS)
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom | ast.Name)
        and (_imports_settings(node) or (isinstance(node, ast.Name) and node.id == "Settings"))
    )
    assert not found, found
