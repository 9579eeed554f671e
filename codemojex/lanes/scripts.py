"""The Lua scripts of the lanes, built from their files when first needed.

A verb is `lua/<verb>.lua`; what verbs share is in `lua/includes/<name>.lua`, one helper
function per file, named after it. A script names what it uses, BullMQ's way:

    --- @include "serve"

on a line of its own. `resolve` replaces each such line with the include's text, the
include's own includes resolved first (so a helper is defined before whatever calls it) and
every include emitted once per script, wherever else it is named again; a cycle or a missing
include is an error when the script is built. Redis keeps a script compiled, but runs it
from the top on every call: each `local function` and key name in it is made again per call,
so a script that carries only what it uses makes nothing it never calls.

Key names are not spelled in Lua: `codemojex/lanes/keys.py` renders them (`keys.lua_names`),
and `source` puts, after the verb's header, `local P = KEYS[1]` and the definitions of the
names the script's code uses (`RING`, `pending_key(lane)`, ...), no others. A new key is a
suffix in `keys.SINGLE` (used as its capitals) or a `keys.Shape` in `keys.PER_ID` (used as
`<builder>_key(id)`), never a string in a Lua file (tests/lanes/test_cost.py checks).

Adding a verb: `lua/<verb>.lua` with its header (KEYS, ARGV, Returns), one `--- @include`
line per helper it calls, its name in `VERBS`, and a method of `Lanes` (facade.py) that calls
it; a helper two verbs share goes into `lua/includes/<helper>.lua`.

`read_lua` is the loader of every Lua file Codemojex ships: codemojex/posting reads its own
scripts with it and resolves their includes with `resolve` and `read_include` (the ring
scripts include `now_ms`, the server's clock, from here).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from importlib import resources
from typing import Final

from codemojex.lanes.keys import lua_names

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
    "waiting",
)

INCLUDE: Final = re.compile(r'^---[ \t]*@include[ \t]+"([a-z0-9_]+)"[ \t]*$\n?', re.M)
_COMMENT: Final = re.compile(r"--[^\n]*")


class IncludeError(ValueError):
    """A script names an include that is missing or includes itself (through others)."""


def read_lua(package: str, name: str) -> str:
    """The text of `lua/<name>.lua` in `package`'s data (`name` may be `includes/<x>`)."""
    return resources.files(package).joinpath("lua", f"{name}.lua").read_text("utf-8")


def resolve(text: str, read_include: Callable[[str], str]) -> str:
    """`text` with every `--- @include "<name>"` line replaced, transitively and once each,
    by `read_include(name)` (see the module's docstring)."""
    emitted: set[str] = set()

    def expand(text: str, stack: tuple[str, ...]) -> str:
        def one(match: re.Match[str]) -> str:
            name = match.group(1)
            if name in stack:
                raise IncludeError(f"circular include: {' -> '.join((*stack, name))}")
            if name in emitted:
                return ""
            try:
                body = read_include(name)
            except FileNotFoundError:
                chain = " -> ".join(stack) or "the script"
                raise IncludeError(f"include not found: {name!r} (in {chain})") from None
            resolved = expand(body, (*stack, name))
            emitted.add(name)
            return resolved if resolved.endswith("\n") else resolved + "\n"

        return INCLUDE.sub(one, text)

    return expand(text, ())


def read_include(name: str) -> str:
    """The text of `lua/includes/<name>.lua` (posting's scripts include the clock from here)."""
    return read_lua("codemojex.lanes", f"includes/{name}")


def key_prelude(code: str) -> str:
    """`local P = KEYS[1]` and the key names (keys.py's) that `code` uses, comments aside."""
    used = set(re.findall(r"\b\w+\b", _COMMENT.sub("", code)))
    lines = ["local P = KEYS[1]"]
    lines += [definition for name, definition in lua_names().items() if name in used]
    return "\n".join(lines) + "\n"


@functools.cache
def source(verb: str) -> str:
    """The full text of one verb's script: its header, the key names it uses, its includes
    (each once, dependencies first), its code."""
    if verb not in VERBS:
        raise KeyError(verb)
    lines = read_lua("codemojex.lanes", verb).splitlines(keepends=True)
    header = 0
    while (
        header < len(lines) and lines[header].startswith("--") and not INCLUDE.match(lines[header])
    ):
        header += 1
    code = resolve("".join(lines[header:]), read_include)
    return "".join(lines[:header]) + key_prelude(code) + code
