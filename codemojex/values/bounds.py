"""A tunable's range, written once at its owner as a bound type (`Annotated[int,
Field(ge=0, le=…)]`): Settings types its field with it, so pydantic checks what the
environment says, and the owner checks what its caller passes with `within`, through the same
type and the same pydantic. No range is written twice."""

from __future__ import annotations

from typing import Any, Final, TypeVar, get_args

from pydantic import ConfigDict, TypeAdapter, ValidationError

N = TypeVar("N", int, float)

_NAMES: Final = ("ge", "gt", "le", "lt")
# Strict: a bool or a string is no number, an int is a float.
_STRICT: Final = ConfigDict(strict=True)
_adapters: dict[int, TypeAdapter[Any]] = {}  # by the bound type's id: a few module constants


def limits_of(bound: object) -> dict[str, Any]:
    """The bounds a bound type carries, by name (`{"ge": 0, "le": 10_000_000}`): for a check
    made per guess, bound once to module constants."""
    found: dict[str, Any] = {}
    for info in get_args(bound)[1:]:
        for item in getattr(info, "metadata", ()):
            for name in _NAMES:
                if getattr(item, name, None) is not None:
                    found[name] = getattr(item, name)
    return found


def within(value: N, bound: object, name: str, error: type[Exception] = ValueError) -> N:
    """`value` if it is a number (never a bool) within `bound`'s limits, else `error`."""
    adapter = _adapters.get(id(bound))
    if adapter is None:
        adapter = _adapters[id(bound)] = TypeAdapter[Any](bound, config=_STRICT)  # type: ignore[arg-type]
    try:
        adapter.validate_python(value)
    except ValidationError as exc:
        raise error(f"{name}: {exc.errors()[0]['msg'].lower()}, got {value!r}") from None
    return value
