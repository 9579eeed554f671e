"""Every setting, walked from `Settings` itself so that a new one cannot slip by: documented
once, in deploy/codemojex.env.example (the file the README and docs/operations.md send an
operator to), showing the default it has rather than setting it again; every number bounded
once: by the bound type its owner defines (`lanes/facade.py` `DeadMax`), which the owner
checks its callers against too (`values/bounds.py` `within`), or, for a value several parts
share, by constants of limits.py named in the field; never a number written in settings.py."""

from __future__ import annotations

import ast
import re
from types import UnionType
from typing import Union, get_args, get_origin

import annotated_types
import pytest
from pydantic.fields import FieldInfo

from codemojex.settings import Settings
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


def test_every_bound_is_a_constant_named_in_the_field() -> None:
    """settings.py writes no number in a bound but a floor of 0 or 1: every other bound is a
    constant of limits.py, named in the field (`le=ROOM.round_timeout_s_max`), for a value
    several parts share; the rest are their owners' bound types."""
    written = [
        ast.unparse(node.value)
        for node in ast.walk(ast.parse(SOURCE.read_text()))
        if isinstance(node, ast.keyword) and node.arg in ("ge", "gt", "le", "lt")
    ]
    numbers = [w for w in written if re.fullmatch(r"[\d_.]+", w) and w not in ("0", "1")]
    assert written and not numbers, numbers
