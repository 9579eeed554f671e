"""Branded ids: a three-letter prefix and a ULID body (26 Crockford base32 characters).

Ids are minted here and validated here; anything that becomes part of a Redis key
name passes `check` first, so user-typed text can never reach a key.
"""

from __future__ import annotations

import re
from typing import Final

from ulid import ULID

ROOM: Final = "ROM"
PLAYER: Final = "PLR"
JOB: Final = "JOB"

_BODY: Final = r"[0-9A-HJKMNP-TV-Z]{26}"
_PATTERNS: Final = {prefix: re.compile(rf"{prefix}{_BODY}\Z") for prefix in (ROOM, PLAYER, JOB)}


def mint(prefix: str) -> str:
    """A new id of the given brand; ids minted later sort after earlier ones."""
    if prefix not in _PATTERNS:
        raise ValueError(f"unknown id prefix {prefix!r}")
    return f"{prefix}{ULID()}"


def is_valid(value: object, prefix: str) -> bool:
    return isinstance(value, str) and _PATTERNS[prefix].match(value) is not None


def brand_of(value: object) -> str | None:
    """The prefix of a valid branded id, or None when `value` is not one."""
    if isinstance(value, str):
        for prefix, pattern in _PATTERNS.items():
            if pattern.match(value):
                return prefix
    return None
