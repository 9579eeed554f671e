"""The Lua scripts of the state (`lua/*.lua`, each headed by its KEYS, ARGV and return
value), read from package data when first needed, with the lanes' loader; a script's
`--- @include "<name>"` lines are resolved from the lanes' `lua/includes/` (the clock)."""

from __future__ import annotations

import functools
from typing import Final, Literal, get_args

from redis.commands.core import AsyncScript

from codemojex.lanes.scripts import read_include, read_lua, resolve
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
    "inbox_settle",
    "inbox_renew",
    "inbox_take",
    "inbox_dead",
    "poller_hold",
    "poller_release",
]
NAMES: Final[tuple[Name, ...]] = get_args(Name)


@functools.cache
def source(name: Name) -> str:
    if name not in NAMES:
        raise KeyError(name)
    return resolve(read_lua("codemojex.state", name), read_include)


def register(redis: AnyRedis, name: Name) -> AsyncScript:
    """The script, ready to call on `redis` (EVALSHA, loaded again on NOSCRIPT)."""
    return redis.register_script(source(name))
