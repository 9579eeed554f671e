"""The Lua scripts of the state (`lua/*.lua`, each headed by its KEYS, ARGV and return value),
built by the one loader (codemojex/lua/loader.py) when first needed: the inbox's scripts name
the shared clock (`--- @include "now_ms"`), a card's read the state's key names (`--- @include
"keys"`, rendered from codemojex/state/keys.py)."""

from __future__ import annotations

from typing import Final, Literal, get_args

from redis.commands.core import AsyncScript

from codemojex.lua.loader import Scripts
from codemojex.state.keys import lua_names
from codemojex.values.redistypes import AnyRedis

Name = Literal[
    "budget_take",
    "card_read",
    "card_write",
    "card_close",
    "command_claim",
    "command_renew",
    "command_release",
    "tap_done",
    "inbox_park",
    "inbox_enter",
    "inbox_settle",
    "inbox_renew",
    "inbox_take",
    "inbox_dead",
    "inbox_legacy",
    "poller_hold",
    "poller_release",
]
NAMES: Final[tuple[Name, ...]] = get_args(Name)
SCRIPTS: Final = Scripts("codemojex.state", NAMES, lua_names())


def source(name: Name) -> str:
    return SCRIPTS.source(name)


def register(redis: AnyRedis, name: Name) -> AsyncScript:
    """The script, ready to call on `redis` (EVALSHA, loaded again on NOSCRIPT)."""
    return redis.register_script(SCRIPTS.source(name))
