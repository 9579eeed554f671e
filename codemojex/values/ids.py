"""Branded ids: a three-letter prefix and a ULID body (26 Crockford base32 characters).

Ids are minted here and validated here; anything that becomes part of a Redis key
name passes `check` first, so user-typed text can never reach a key.

Most ids are minted (time-ordered ULIDs). A guess's job id is derived from its origin instead
(`derived`: the Telegram message or callback query it came from), so an update delivered
twice makes the same id: the lanes dedupe it while the job lives, and the guesses' primary key
in the database (the guess id is the job id) forever after, even when Redis lost its data.
A derived id is a valid ULID of the brand but carries no time: nothing orders job ids (a lane
serves its jobs by their mint counter, the worker decides them in that order).
"""

from __future__ import annotations

import hashlib
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


def derived(prefix: str, origin: str) -> str:
    """The id of the given brand that `origin` always gives (128 bits of its BLAKE2b digest
    as a ULID body): one origin, one id, in every process."""
    if prefix not in _PATTERNS:
        raise ValueError(f"unknown id prefix {prefix!r}")
    if not isinstance(origin, str) or not origin:
        raise ValueError("an origin must be non-empty text")
    digest = hashlib.blake2b(origin.encode(), digest_size=16, person=prefix.encode()).digest()
    return f"{prefix}{ULID.from_bytes(digest)}"


def is_valid(value: object, prefix: str) -> bool:
    return isinstance(value, str) and _PATTERNS[prefix].match(value) is not None


def brand_of(value: object) -> str | None:
    """The prefix of a valid branded id, or None when `value` is not one."""
    if isinstance(value, str):
        for prefix, pattern in _PATTERNS.items():
            if pattern.match(value):
                return prefix
    return None
