"""What the code defines, read from its syntax trees (never imported: no module runs), so that
tests/test_docs.py can tell whether a name a doc writes exists, and where.

A module's names are what `module.name` would find: its top-level definitions, assignments
and imports (inside top-level `if`/`try` too). A class's members are what `obj.name` would
find: its body's definitions and assignments, the `self.x` its methods assign, and its bases'
members (bases looked up by name among Codemojex's classes).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from tests.helpers.support import ROOT

PACKAGE = ROOT / "codemojex"


@dataclass
class ClassInfo:
    name: str
    bases: list[str]
    members: set[str] = field(default_factory=set)


@dataclass
class ModuleInfo:
    name: str  # dotted: codemojex.db.store
    path: Path
    names: set[str] = field(default_factory=set)
    classes: dict[str, ClassInfo] = field(default_factory=dict)
    # top-level `NAME = Class(...)` and imported names: what class a name is, when known
    instances: dict[str, str] = field(default_factory=dict)
    params: set[str] = field(default_factory=set)
    # the words its constants spell (`KIND_KEYS_OFF = "keys_off"`, `__tablename__ = "rooms"`)
    spelled: set[str] = field(default_factory=set)

    def defines(self, name: str) -> bool:
        """`name` is the module's, one of its classes' members, or a parameter of its code."""
        return (
            name in self.names
            or name in self.params
            or any(name in c.members for c in self.classes.values())
        )


def _targets(node: ast.expr) -> list[str]:
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Tuple | ast.List):
        return [n for elt in node.elts for n in _targets(elt)]
    return []


def _top_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements run at import: the body, and what its `if`/`try`/`with` blocks hold."""
    out: list[ast.stmt] = []
    for stmt in body:
        out.append(stmt)
        if isinstance(stmt, ast.If | ast.With | ast.AsyncWith):
            out += _top_level(stmt.body) + _top_level(getattr(stmt, "orelse", []))
        elif isinstance(stmt, ast.Try):
            out += _top_level(stmt.body + stmt.orelse + stmt.finalbody)
            for handler in stmt.handlers:
                out += _top_level(handler.body)
    return out


def _class(node: ast.ClassDef) -> ClassInfo:
    info = ClassInfo(
        node.name,
        [b.id if isinstance(b, ast.Name) else ast.unparse(b).split(".")[-1] for b in node.bases],
    )
    for stmt in _top_level(node.body):
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            info.members.add(stmt.name)
        elif isinstance(stmt, ast.Assign):
            info.members.update(n for t in stmt.targets for n in _targets(t))
        elif isinstance(stmt, ast.AnnAssign):
            info.members.update(_targets(stmt.target))
    for sub in ast.walk(node):
        if (
            isinstance(sub, ast.Attribute)
            and isinstance(sub.ctx, ast.Store)
            and isinstance(sub.value, ast.Name)
            and sub.value.id == "self"
        ):
            info.members.add(sub.attr)
    return info


def _module(name: str, path: Path) -> ModuleInfo:
    tree = ast.parse(path.read_text(), str(path))
    info = ModuleInfo(name, path)
    for stmt in _top_level(tree.body):
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            info.names.add(stmt.name)
        elif isinstance(stmt, ast.ClassDef):
            info.names.add(stmt.name)
            info.classes[stmt.name] = _class(stmt)
        elif isinstance(stmt, ast.Assign | ast.AnnAssign):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            names = [n for t in targets for n in _targets(t)]
            info.names.update(names)
            value = stmt.value
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Name | ast.Attribute):
                called = value.func.id if isinstance(value.func, ast.Name) else value.func.attr
                info.instances.update(dict.fromkeys(names, called))
        elif isinstance(stmt, ast.Import | ast.ImportFrom):
            for alias in stmt.names:
                local = alias.asname or alias.name.split(".")[0]
                info.names.add(local)
                info.instances[local] = alias.name.split(".")[-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            a = node.args
            info.params.update(x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs])
        elif (
            isinstance(node, ast.Assign | ast.AnnAssign)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            info.spelled.add(node.value.value)
    return info


class CodeIndex:
    """Every module of the codemojex package, by dotted name and by last component."""

    def __init__(self) -> None:
        self.modules: dict[str, ModuleInfo] = {}
        self.by_path: dict[Path, ModuleInfo] = {}
        self.by_last: dict[str, list[ModuleInfo]] = defaultdict(list)
        self.classes: dict[str, list[ClassInfo]] = defaultdict(list)
        for path in sorted(PACKAGE.rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            info = _module(".".join(parts), path)
            self.modules[info.name] = info
            self.by_path[path] = info
            self.by_last[parts[-1]].append(info)
            for cls in info.classes.values():
                self.classes[cls.name].append(cls)
        self.spelled = set().union(*(m.spelled for m in self.modules.values()))

    def module_at(self, path: Path) -> ModuleInfo | None:
        if path.is_dir():
            path = path / "__init__.py"
        return self.by_path.get(path)

    def defined_anywhere(self, name: str) -> bool:
        return name in self.by_last or any(m.defines(name) for m in self.modules.values())

    def members(self, cls: ClassInfo, seen: frozenset[str] = frozenset()) -> set[str]:
        """A class's members with its bases' (the bases Codemojex defines)."""
        out = set(cls.members)
        for base in cls.bases:
            if base not in seen:
                for parent in self.classes.get(base, []):
                    out |= self.members(parent, seen | {cls.name})
        return out

    def classes_named(self, name: str, module: ModuleInfo | None = None) -> list[ClassInfo]:
        """The classes a name stands for: a class, or an instance of one (`OUTAGES`), in
        `module` when given, else anywhere."""
        modules = [module] if module else list(self.modules.values())
        out: list[ClassInfo] = []
        for m in modules:
            if name in m.classes:
                out.append(m.classes[name])
            elif name in m.instances:
                out += self.classes.get(m.instances[name], [])
        return out

    def resolves(self, parts: list[str], row: list[ModuleInfo]) -> bool:
        """`a.b.c`: `a` a module (by its last name: `store`, `outages`), a class or an instance
        of one, or a variable (`tx`) of a class one of the row's modules defines; each next
        part a name of the module or a member of the class."""
        head, rest = parts[0], parts[1:]
        starts: list[ModuleInfo | ClassInfo] = [*self.by_last.get(head, [])]
        dotted = (
            self.modules.get(".".join(["codemojex", *parts[:1]])) if head != "codemojex" else None
        )
        if dotted:
            starts.append(dotted)
        if head == "codemojex":
            starts.append(self.modules["codemojex"])
        for m in row:
            starts += self.classes_named(head, m)
        if not starts:
            starts += self.classes_named(head)
        if not starts and head[:1].islower():  # a variable: `tx.conn`, `sender.poke`
            starts += [c for m in row for c in m.classes.values()]
        return any(self._walk(start, rest) for start in starts)

    def _walk(self, at: ModuleInfo | ClassInfo, rest: list[str]) -> bool:
        if not rest:
            return True
        name, rest = rest[0], rest[1:]
        if isinstance(at, ClassInfo):
            if name not in self.members(at):
                return False
            return not rest or any(self._walk(c, rest) for c in self.classes.get(name, []))
        sub = self.modules.get(f"{at.name}.{name}")
        if sub and self._walk(sub, rest):
            return True
        if name not in at.names:
            return False
        return not rest or any(self._walk(c, rest) for c in self.classes_named(name, at))
