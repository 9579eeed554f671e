"""Every setting, walked from `Settings` itself so that a new one cannot slip by: documented
once, in deploy/codemojex.env.example (the file the README and docs/operations.md send an
operator to), showing the default it has rather than setting it again; every number bounded
once: by the bound type its owner defines (`lanes/facade.py` `DeadMax`), which the owner
checks its callers against too (`values/bounds.py` `within`), or, for a value several parts
share, by constants of limits.py named in the field; never a number written in settings.py,
no bound's number compared again anywhere, no default written out again at its owner."""

from __future__ import annotations

import ast
import re
from types import ModuleType, UnionType
from typing import Union, get_args, get_origin

import annotated_types
import pytest
from pydantic.fields import FieldInfo

from codemojex.settings import Settings
from codemojex.values.bounds import limits_of
from tests.helpers.support import ROOT

ENV_EXAMPLE = ROOT / "deploy" / "codemojex.env.example"
SOURCE = ROOT / "codemojex" / "settings.py"
# `CODEMOJEX_X=value` set, or `# CODEMOJEX_X=value` showing the default.
_VARIABLE = re.compile(r"^(#\s*)?(CODEMOJEX_[A-Z0-9_]+)=(.*)$", re.MULTILINE)
_BOUNDS = (annotated_types.Ge, annotated_types.Gt, annotated_types.Le, annotated_types.Lt)


def _env(name: str) -> str:
    return f"CODEMOJEX_{name.upper()}"


def _lines() -> list[tuple[bool, str, str]]:
    """(commented?, variable, value) for every variable line of the example."""
    return [(bool(m[1]), m[2], m[3]) for m in _VARIABLE.finditer(ENV_EXAMPLE.read_text())]


def test_every_setting_is_documented_once_and_nothing_else_is() -> None:
    named = [variable for _, variable, _ in _lines()]
    settings = {_env(name) for name in Settings.model_fields}
    assert sorted(v for v in settings if named.count(v) != 1) == []
    assert sorted(set(named) - settings) == []


def _shown(field: FieldInfo) -> str | None:
    """The default as the example writes it, for the settings that have a plain one."""
    default = field.default
    if isinstance(default, bool):
        return str(default).lower()
    if isinstance(default, int | float | str):
        return f"{default:g}" if isinstance(default, float) else str(default)
    return None


def test_the_example_shows_the_defaults_and_sets_only_what_an_operator_must_choose() -> None:
    """A commented line shows the default; an active line is a choice (a URL, a token, who
    the operators are), never a default written again, which would pin a deployment to a
    number the code has since changed."""
    fields = {_env(name): field for name, field in Settings.model_fields.items()}
    wrong = []
    for commented, variable, value in _lines():
        shown = _shown(fields[variable])
        if commented and value and shown is not None and value != shown:
            wrong.append(f"# {variable}={value}, the default is {shown}")
        if not commented and shown is not None and value == shown:
            wrong.append(f"{variable}={value} sets the default: comment it out")
    assert not wrong, wrong


def _bounds(field: FieldInfo) -> set[type]:
    """The kinds of bound on a field: its own, or its type's inside an optional one."""
    found = list(field.metadata)
    for arg in get_args(field.annotation):
        found += getattr(arg, "__metadata__", ())
    items = [m for info in found for m in getattr(info, "metadata", [info])]
    return {type(m) for m in items if isinstance(m, _BOUNDS)}


def _is_number(field: FieldInfo) -> bool:
    """int or float, or an optional one (never a list of them)."""
    optional = get_origin(field.annotation) in (Union, UnionType)
    kinds = {field.annotation, *(get_args(field.annotation) if optional else ())}
    kinds |= {get_args(k)[0] for k in kinds if get_args(k) and hasattr(k, "__metadata__")}
    return bool(kinds & {int, float}) and bool not in kinds


@pytest.mark.parametrize("name", sorted(Settings.model_fields))
def test_every_number_is_bounded_below_and_above(name: str) -> None:
    field = Settings.model_fields[name]
    if _is_number(field):
        kinds = _bounds(field)
        assert kinds & {annotated_types.Ge, annotated_types.Gt}, name
        assert kinds & {annotated_types.Le, annotated_types.Lt}, name


def test_a_field_typed_by_its_owner_states_no_bound_of_its_own() -> None:
    twice = []
    for node in ast.walk(ast.parse(SOURCE.read_text())):
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.annotation, ast.Attribute)):
            continue
        if isinstance(node.value, ast.Call) and any(
            k.arg in ("ge", "gt", "le", "lt") for k in node.value.keywords
        ):
            twice.append(ast.unparse(node.target))
    assert not twice, twice


def _number(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) in (int, float)


def test_settings_writes_no_number_but_a_port() -> None:
    """No default or bound is written in settings.py but a port's default and a floor of 0 or
    1: the rest are their owners' constants and bound types, or limits.py's shared values
    named in the field (`le=ROOM.round_timeout_s_max`)."""
    written = []
    for node in ast.walk(ast.parse(SOURCE.read_text())):
        if not (isinstance(node, ast.AnnAssign) and node.value is not None):
            continue
        value, port = node.value, "Port" in ast.unparse(node.annotation)
        if _number(value) and not port:
            written.append(f"{ast.unparse(node.target)} = {ast.unparse(value)}")
        for keyword in value.keywords if isinstance(value, ast.Call) else ():
            floor = ast.unparse(keyword.value) in ("0", "1") and keyword.arg != "default"
            if _number(keyword.value) and not floor:
                written.append(
                    f"{ast.unparse(node.target)} {keyword.arg}={ast.unparse(keyword.value)}"
                )
    assert not written, written


def _bound_types() -> dict[tuple[str, str], object]:
    """The parts' bound types Settings reads (`facade.DeadMax`), by (module, name)."""
    import codemojex.settings as settings_module

    found: dict[tuple[str, str], object] = {}
    for node in ast.walk(ast.parse(SOURCE.read_text())):
        if isinstance(node, ast.AnnAssign) and isinstance(node.annotation, ast.Attribute):
            owner = node.annotation.value
            assert isinstance(owner, ast.Name), ast.unparse(node)
            module = getattr(settings_module, owner.id)
            name = node.annotation.attr
            if limits_of(getattr(module, name)):  # a range (a Literal's choices are none)
                found[module.__name__, name] = getattr(module, name)
    return found


def _modules() -> dict[str, ast.Module]:
    package = ROOT / "codemojex"
    return {
        ".".join(path.relative_to(ROOT).with_suffix("").parts): ast.parse(path.read_text())
        for path in sorted(package.rglob("*.py"))
    }


def _called_name(node: ast.expr) -> str:
    return node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")


def test_every_bound_type_settings_reads_is_checked_by_its_part_too() -> None:
    """What a caller passes a part is checked against the range the environment is: `within`
    with the same bound type, never a comparison of its own."""
    checked = {
        _called_name(node.args[1])
        for tree in _modules().values()
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and _called_name(node.func) == "within"
    }
    types = {name for _, name in _bound_types()}
    assert types and sorted(types - checked) == []


def _bound_names(module: ast.Module, name: str) -> set[str]:
    """The constants a bound type's definition names (`RETENTION_MS_MAX`, `updates_max`)."""
    for node in module.body:
        if isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == [name]:
            return {
                _called_name(n)
                for n in ast.walk(node.value)
                if (isinstance(n, ast.Attribute | ast.Name) and _called_name(n).isupper())
                or (isinstance(n, ast.Attribute) and n.attr.islower() and "_" in n.attr)
            } - {"Annotated", "Field"}
    raise AssertionError(f"{name} is not defined at the top of its module")


def test_no_range_settings_read_is_compared_again_anywhere() -> None:
    """A bound type's numbers are written once: its owner compares no literal of them, and no
    module compares against a constant its bounds are made of (the range would then live in
    two places, free to drift apart)."""
    modules = _modules()
    again = []
    for (owner, name), bound in _bound_types().items():
        numbers = {v for v in limits_of(bound).values() if v not in (0, 1)}
        names = _bound_names(modules[owner], name)
        for where, tree in modules.items():
            for node in ast.walk(tree):
                if not isinstance(node, ast.Compare):
                    continue
                for side in [node.left, *node.comparators]:
                    literal = isinstance(side, ast.Constant) and side.value in numbers
                    if (where == owner and literal) or _called_name(side) in names:
                        again.append(f"{where}:{node.lineno} {ast.unparse(node)} ({name})")
    assert not again, again


def test_no_part_writes_a_settings_default_again() -> None:
    """A setting's default is its owner's constant, which Settings points at: no function of
    the owner takes the same number as a keyword default written out again."""
    import codemojex.settings as settings_module

    modules = _modules()
    again = []
    for node in ast.walk(ast.parse(SOURCE.read_text())):
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.value, ast.Attribute)):
            continue
        owner = getattr(settings_module, ast.unparse(node.value.value))
        default = getattr(owner, node.value.attr)
        if not isinstance(owner, ModuleType):  # a shared value of limits.py
            continue
        if not isinstance(default, int | float) or default in (0, 1):
            continue
        for function in ast.walk(modules[owner.__name__]):
            if isinstance(function, ast.arguments):
                for value in [*function.defaults, *function.kw_defaults]:
                    if isinstance(value, ast.Constant) and value.value == default:
                        again.append(
                            f"{owner.__name__}:{value.lineno} {default} ({node.value.attr})"
                        )
    assert not again, again
