"""The Lua scripts of the lanes, read from package data when first needed.

`read_lua` is the loader of every Lua file Codemojex ships (codemojex/posting reads its own
scripts with it too).
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import Final

VERBS: Final = (
    "enqueue",
    "admit",
    "claim",
    "wclaim",
    "ack",
    "ack_many",
    "ack_wclaim",
    "ack_wclaims",
    "retry",
    "extend",
    "reap",
    "promote",
    "retain",
    "limit",
    "unlimit",
    "weight",
    "pause",
    "resume",
    "pause_queue",
    "resume_queue",
    "reassign",
    "purge",
    "snapshot",
    "check",
    "repair",
    "stats",
    "rooms",
    "dead",
    "requeue",
)

# Shared Lua prepended to a verb's file (Redis scripts cannot include one another).
_INCLUDES: Final = {"check": ("_survey",), "repair": ("_survey",)}


def read_lua(package: str, name: str) -> str:
    """The text of `lua/<name>.lua` in `package`'s data."""
    return resources.files(package).joinpath("lua", f"{name}.lua").read_text("utf-8")


def _read(name: str) -> str:
    return read_lua("codemojex.lanes", name)


@functools.cache
def source(verb: str) -> str:
    """The full text of one verb's script: the common helpers, its includes, the verb."""
    if verb not in VERBS:
        raise KeyError(verb)
    parts = [_read("_common"), *(_read(name) for name in _INCLUDES.get(verb, ())), _read(verb)]
    return "\n".join(parts)
