"""A tunable's range, written once at its owner as a bound type (`Annotated[int,
Field(ge=0, le=…)]`): Settings types its field with it, so pydantic checks what the
environment says, and the owner checks what its caller passes with `within`, reading the
same bounds. No range is written twice."""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any, Final, TypeVar, get_args

N = TypeVar("N", int, float)

_TESTS: Final[tuple[tuple[str, str, Callable[[Any, Any], bool]], ...]] = (
    ("ge", ">=", operator.ge),
    ("gt", ">", operator.gt),
    ("le", "<=", operator.le),
    ("lt", "<", operator.lt),
)


def limits_of(bound: object) -> dict[str, Any]:
    """The bounds a bound type carries, by name (`{"ge": 0, "le": 10_000_000}`)."""
    found: dict[str, Any] = {}
    for info in get_args(bound)[1:]:
        for item in getattr(info, "metadata", ()):
            for name, _, _ in _TESTS:
                if getattr(item, name, None) is not None:
                    found[name] = getattr(item, name)
    return found


def within(value: N, bound: object, name: str, error: type[Exception] = ValueError) -> N:
    """`value` if it is a number (never a bool) within `bound`'s limits, else `error`."""
    base = get_args(bound)[0]
    if isinstance(value, bool) or not isinstance(value, int if base is int else int | float):
        raise error(f"{name} must be a number, got {value!r}")
    for limit_name, sign, test in _TESTS:
        limit = limits_of(bound).get(limit_name)
        if limit is not None and not test(value, limit):
            raise error(f"{name} must be {sign} {limit}, got {value!r}")
    return value
