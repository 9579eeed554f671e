"""The Lua scripts of posting (`lua/*.lua`, each headed by its KEYS, ARGV and return value),
built by the one loader (codemojex/lua/loader.py) when first needed: the ring's scripts name
the shared clock (`--- @include "now_ms"`) and posting's key names (`--- @include "keys"`,
rendered from codemojex/posting/keys.py)."""

from __future__ import annotations

from typing import Final, Literal, get_args

from redis.commands.core import AsyncScript

from codemojex.lua.loader import Scripts
from codemojex.posting.keys import lua_names
from codemojex.values.redistypes import AnyRedis

Name = Literal[
    "pace_take",
    "pace_settle",
    "pace_block",
    "pace_refused",
    "lease_renew",
    "lease_fence",
    "posted_mark",
    "ring_add",
    "ring_take",
    "ring_release",
]
NAMES: Final[tuple[Name, ...]] = get_args(Name)
SCRIPTS: Final = Scripts("codemojex.posting", NAMES, lua_names())


def source(name: Name) -> str:
    return SCRIPTS.source(name)


def register(redis: AnyRedis, name: Name) -> AsyncScript:
    """The script, ready to call on `redis` (EVALSHA, loaded again on NOSCRIPT)."""
    return redis.register_script(SCRIPTS.source(name))
