"""The loader of every Lua script Codemojex ships: the lanes', posting's and the state's.

A package's script is `<package>/lua/<name>.lua`, headed by its KEYS, ARGV and return value.
What scripts share is an include, one helper function per file, named after it: the package's
own `lua/includes/<name>.lua`, or one every package shares, `codemojex/lua/includes/<name>.lua`.
A Lua file names each include it uses, BullMQ's way:

    --- @include "holder"

on a line of its own. `resolve` replaces each such line with the include's text, the
include's own includes resolved first (so a helper is defined before whatever calls it) and
every include emitted once per script, wherever else it is named again; a cycle or a missing
include is an error when the script is built. So every name a file uses is defined in it or
in an include it names, and nothing reaches a script that it did not name
(tests/test_lua.py reads every file and every built script for a name defined nowhere).

Key names are not spelled in Lua. Each package's `keys.py` renders the names its scripts
build (`lua_names`: a constant per key of the whole queue, `RING`; a builder per key of an
id, `pending_key(lane)`), each on the prefix the script is given as KEYS[1], and they are the
include `keys`, which a file that uses one names like any other (`--- @include "keys"`). Redis
keeps a script compiled but runs it from the top on every call, so a script carries of `keys`
the definitions it uses, no others, and of the includes only those it names: it makes
nothing per call that it never calls.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from importlib import resources
from typing import Final

INCLUDE: Final = re.compile(r'^---[ \t]*@include[ \t]+"([a-z0-9_]+)"[ \t]*$\n?', re.M)
KEYS_INCLUDE: Final = "keys"
# The first line of the `keys` include: the prefix every key name is built on.
PREFIX: Final = "local P = KEYS[1]"
SHARED: Final = "codemojex.lua"
_COMMENT: Final = re.compile(r"--[^\n]*")


class IncludeError(ValueError):
    """A script names an include that is missing or includes itself (through others)."""


def read_lua(package: str, name: str) -> str:
    """The text of `lua/<name>.lua` in `package`'s data (`name` may be `includes/<x>`)."""
    return resources.files(package).joinpath("lua", f"{name}.lua").read_text("utf-8")


def read_shared(name: str) -> str:
    """The text of the include every package shares, `codemojex/lua/includes/<name>.lua`."""
    return resources.files(SHARED).joinpath("includes", f"{name}.lua").read_text("utf-8")


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


def key_constant(name: str, suffix: str) -> str:
    """The Lua definition of a key of the whole queue: `local RING = P .. 'ring'`."""
    return f"local {name} = P .. '{suffix}'"


def key_builder(name: str, arg: str, before: str, after: str = "") -> str:
    """The Lua definition of a key of one id: `local function pending_key(lane) return P ..
    'g:' .. lane .. ':pending' end`."""
    tail = f" .. '{after}'" if after else ""
    return f"local function {name}({arg}) return P .. '{before}' .. {arg}{tail} end"


def _words(code: str) -> set[str]:
    return set(re.findall(r"\b\w+\b", _COMMENT.sub("", code)))


class Scripts:
    """The scripts of one package: `names` in `<package>/lua/`, its key names rendered by its
    keys.py (`key_names`: the name a script uses -> its Lua definition)."""

    def __init__(self, package: str, names: Iterable[str], key_names: Mapping[str, str]) -> None:
        self.package = package
        self.names: tuple[str, ...] = tuple(names)
        self.key_names = dict(key_names)
        self._built: dict[str, str] = {}

    def include(self, name: str) -> str:
        """The text of include `name`: the package's own, the shared one, or `keys` (every
        key name; a built script keeps those it uses)."""
        if name == KEYS_INCLUDE:
            return "\n".join([PREFIX, *self.key_names.values()]) + "\n"
        try:
            return read_lua(self.package, f"includes/{name}")
        except FileNotFoundError:
            return read_shared(name)

    def file(self, name: str) -> str:
        """The text of script `name` as it is written (its includes named, not resolved)."""
        if name not in self.names:
            raise KeyError(name)
        return read_lua(self.package, name)

    def source(self, name: str) -> str:
        """The text Redis runs for script `name`: its own, every include it names resolved in
        place (dependencies first, each once), of `keys` only the names the script uses."""
        built = self._built.get(name)
        if built is None:
            built = self._built[name] = self._trimmed(resolve(self.file(name), self.include))
        return built

    def _trimmed(self, text: str) -> str:
        definitions = set(self.key_names.values())
        lines = text.splitlines(keepends=True)
        code = "".join(line for line in lines if line.rstrip("\n") not in definitions)
        used = _words(code)
        kept = [
            line
            for line in lines
            if line.rstrip("\n") not in definitions or self._defined_by(line) in used
        ]
        return "".join(kept)

    @staticmethod
    def _defined_by(line: str) -> str:
        """The name a key name's definition defines (`local RING = …`, `local function
        pending_key(…`)."""
        match = re.match(r"local (?:function )?(\w+)", line)
        assert match is not None, line
        return match.group(1)
