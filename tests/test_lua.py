"""Every Lua script Codemojex ships, as written and as Redis runs it: each name a file uses is
defined in it or in an include it names (no name is injected), each include it names gives it
something it uses, each script is headed by its KEYS, ARGV and return value, and no file
spells a key name (the packages' keys.py render them: the include `keys`)."""

from __future__ import annotations

import re
from importlib import resources

import pytest

from codemojex.lanes.scripts import SCRIPTS as LANES
from codemojex.lua.loader import (
    INCLUDE,
    KEYS_INCLUDE,
    PREFIX,
    SHARED,
    IncludeError,
    Scripts,
    resolve,
)
from codemojex.posting.scripts import SCRIPTS as POSTING
from codemojex.state.scripts import SCRIPTS as STATE
from tests.helpers.lua import REDIS_GLOBALS, names

PACKAGES = (LANES, POSTING, STATE)


def _includes_of(package: str) -> list[str]:
    folder = resources.files(package).joinpath("lua", "includes")
    if not folder.is_dir():
        return []
    return sorted(p.name.removesuffix(".lua") for p in folder.iterdir() if p.name.endswith(".lua"))


def _files() -> list[tuple[Scripts, str, str]]:
    """(package, what, the file's text) for every script and include, the shared ones once."""
    out = [(scripts, name, scripts.file(name)) for scripts in PACKAGES for name in scripts.names]
    for scripts in PACKAGES:
        for name in _includes_of(scripts.package):
            out.append((scripts, f"includes/{name}", scripts.include(name)))
    for name in _includes_of(SHARED):
        out.append((LANES, f"{SHARED}/includes/{name}", LANES.include(name)))
    return out


FILES = _files()
IDS = [f"{scripts.package.rsplit('.', 1)[1]}:{what}" for scripts, what, _ in FILES]
SCRIPTS = [(scripts, name) for scripts in PACKAGES for name in scripts.names]
SCRIPT_IDS = [f"{scripts.package.rsplit('.', 1)[1]}:{name}" for scripts, name in SCRIPTS]


def _defined_by_include(scripts: Scripts, name: str) -> set[str]:
    if name == KEYS_INCLUDE:
        return {"P", *scripts.key_names}
    return names(scripts.include(name), REDIS_GLOBALS).defined


@pytest.mark.parametrize(("scripts", "what", "text"), FILES, ids=IDS)
def test_every_name_a_file_uses_is_its_own_or_an_included_ones(
    scripts: Scripts, what: str, text: str
) -> None:
    named = INCLUDE.findall(text)
    given = {name: _defined_by_include(scripts, name) for name in named}
    found = names(text, REDIS_GLOBALS.union(*given.values()))
    assert not found.free, f"{what} uses names it neither defines nor includes: {found.free}"
    for name, defined in given.items():
        assert defined & found.used_outer, f"{what} includes {name!r} and uses none of it"


@pytest.mark.parametrize(("scripts", "name"), SCRIPTS, ids=SCRIPT_IDS)
def test_every_script_redis_runs_defines_every_name_it_uses(scripts: Scripts, name: str) -> None:
    found = names(scripts.source(name), REDIS_GLOBALS)
    assert not found.free, f"{name}: {found.free}"


def test_the_check_finds_a_name_no_include_defines() -> None:
    """What the two tests above stand on: a name from nowhere, a global assigned, a helper of
    an include not named, a block's local used after the block, are all found; fields, table
    keys, parameters and loop variables are not names to find."""
    text = (
        "local t = {p = 1, q = KEYS[1]}\n"
        "local function f(a, ...) return a + t.p + #ARGV end\n"
        "for i, v in ipairs(t) do f(i, v) end\n"
        "if f(1) then local inner = 1 end\n"
        "x = inner\n"
        "return RING .. job_key(t:q())\n"
    )
    free = [name for name, _ in names(text, REDIS_GLOBALS).free]
    assert free == ["x", "inner", "RING", "job_key"]
    assert names(text, REDIS_GLOBALS).defined == {"t", "f"}


@pytest.mark.parametrize(("scripts", "name"), SCRIPTS, ids=SCRIPT_IDS)
def test_every_script_is_headed_by_its_keys_argv_and_return_value(
    scripts: Scripts, name: str
) -> None:
    header = []
    for line in scripts.source(name).splitlines():
        if not line.startswith("--"):
            break
        header.append(line)
    assert header[0].startswith(f"-- {name}: "), name
    assert any(line.startswith("-- KEYS[1") for line in header), name
    assert any(line.startswith("-- ARGV") for line in header), name
    assert any(line.startswith("-- Returns") for line in header), name


@pytest.mark.parametrize(("scripts", "what", "text"), FILES, ids=IDS)
def test_no_file_spells_a_key_name(scripts: Scripts, what: str, text: str) -> None:
    """A key a script builds is a name of the include `keys` (rendered from its package's
    keys.py), never a string put on a prefix or a key (the survey only matches the prefix,
    to SCAN the queue)."""
    code = re.sub(r"--[^\n]*", "", text)
    spelled = re.findall(r"(?:KEYS\[\d+\]|\bP)\s*\.\.\s*'([^']*)'", code)
    assert spelled in ([], ["*"]), f"{what} spells a key: {spelled}"


def test_a_script_carries_of_the_keys_only_the_names_it_uses() -> None:
    ring_take = POSTING.source("ring_take")
    assert PREFIX + "\n" in ring_take
    assert "local RING = P .. 'send:ring'" in ring_take
    assert "local function chat_lease_key(chat) return P .. 'send:lease:' .. chat end" in ring_take
    assert "COOL" not in ring_take  # ring_release's, not ring_take's
    assert "@include" not in ring_take
    assert PREFIX not in POSTING.source("pace_take")  # names no include `keys`


@pytest.mark.parametrize("scripts", PACKAGES, ids=lambda s: s.package)
def test_every_lua_file_is_a_script_its_package_loads(scripts: Scripts) -> None:
    folder = resources.files(scripts.package).joinpath("lua")
    files = {p.name.removesuffix(".lua") for p in folder.iterdir() if p.name.endswith(".lua")}
    assert files == set(scripts.names)


def test_an_unknown_script_or_include_is_refused() -> None:
    with pytest.raises(KeyError):
        POSTING.source("pace_everything")
    with pytest.raises(IncludeError, match="include not found: 'nope'"):
        resolve('--- @include "nope"\n', STATE.include)
