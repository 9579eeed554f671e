"""The cost rule, read off the scripts: nothing on the enqueue/claim/ack path (nor the
maintenance: reap, promote, retain) scans a ring or a list of lanes.

Every Redis command a hot verb can run is in the text `scripts.source` builds for it (its
own file plus every include it names, transitively); none may be LPOS, LRANGE, SCAN, KEYS,
HGETALL or SMEMBERS, every LREM must be `LREM key -1 x` (it stops at the tail, where the
LMOVE just put x) and every ZRANGE must read one head (`ZRANGE key, 0, 0`: O(log n), the
operators' books).
"""

from __future__ import annotations

import re
from importlib import resources

import pytest

from codemojex.lanes import keys as K
from codemojex.lanes.scripts import VERBS, source
from codemojex.lua.loader import IncludeError, read_lua, resolve

HOT = [
    "enqueue", "admit", "claim", "wclaim", "ack", "ack_many", "ack_wclaim", "ack_wclaims",
    "retry", "extend", "reap", "promote", "retain",
]  # fmt: skip
SCANNING = {"LPOS", "LRANGE", "SCAN", "KEYS", "HGETALL", "SMEMBERS", "ZRANGE", "HKEYS"}
CALL = re.compile(r"redis\.call\('([A-Z]+)'([^)]*)\)")
FUNCTION = re.compile(r"^local function (\w+)\(", re.M)
COMMENT = re.compile(r"--[^\n]*")


def code(verb: str) -> str:
    """What the script of `verb` runs: its built text, comments aside."""
    return COMMENT.sub("", source(verb))


# admit's one way to a scan: a room found without a ceiling while holding as many jobs in
# flight as the ceiling it gets leaves the ring as `limit` would take it off (LREM ring 0),
# once; any room below its new ceiling (every room on the steady path) gets it with one HSET.
RARE: dict[str, set[str]] = {"admit": {"room_recheck"}}


def hot_code(verb: str) -> str:
    """What `verb` runs on its steady path: its code less the bodies of its rare helpers."""
    text = code(verb)
    for name in RARE.get(verb, ()):
        text = re.sub(rf"^local function {name}\(.*?^end$", "", text, flags=re.S | re.M)
    return text


@pytest.mark.parametrize("verb", HOT)
def test_hot_verbs_never_scan(verb: str) -> None:
    calls = CALL.findall(hot_code(verb))
    assert calls, "the pattern must see the script's commands"
    names = {name for name, args in calls if not _reads_a_head(name, args)}
    assert not names & SCANNING, f"{verb} may scan: {sorted(names & SCANNING)}"
    for name, args in calls:
        if name == "LREM":
            assert args.split(",")[2].strip() == "-1", f"{verb}: LREM{args} may scan"


def _reads_a_head(name: str, args: str) -> bool:
    """`ZRANGE key, 0, 0[, 'WITHSCORES']`: the first member only."""
    parts = [a.strip() for a in args.split(",")]
    return name == "ZRANGE" and parts[2:4] == ["0", "0"]


def test_stats_reads_only_the_books() -> None:
    """The metrics call stats every scrape: it may read whole only gactive (a room per busy
    consumer at most) and the paused set (what admins paused), never a ring or the rooms."""
    calls = CALL.findall(code("stats"))
    assert calls
    for name, args in calls:
        key = args.split(",")[1].strip() if "," in args else args.strip()
        if name in ("HGETALL", "SMEMBERS"):
            assert key in ("GACTIVE", "PAUSED"), f"stats: {name}{args}"
        elif name == "ZRANGE":
            assert _reads_a_head(name, args), f"stats: {name}{args}"
        elif name == "ZREVRANGE":
            assert "top - 1" in args, f"stats: {name}{args} must be bounded by ARGV"
        else:
            assert name not in SCANNING | {"ZRANGEBYSCORE", "SSCAN", "HSCAN"}, name


def test_the_helpers_that_scan_are_only_reached_by_admin_verbs() -> None:
    includes = {name: read_lua("codemojex.lanes", f"includes/{name}") for name in INCLUDES}
    scanning = {n for n, text in includes.items() if re.search(r"'LREM', \w+, 0", text)}
    assert scanning == {"room_recheck", "lane_unring"}
    for verb in HOT:
        assert not set(FUNCTION.findall(code(verb))) & (scanning - RARE.get(verb, set())), verb


# -- what a script carries -------------------------------------------------------------------

INCLUDES = sorted(
    path.name.removesuffix(".lua")
    for path in (resources.files("codemojex.lanes") / "lua" / "includes").iterdir()
    if path.name.endswith(".lua")
)


@pytest.mark.parametrize("verb", VERBS)
def test_a_script_defines_only_what_it_runs(verb: str) -> None:
    """Every function a built script defines is used in it, every helper it uses is
    included, every key name it declares is used, and nothing is defined twice (an include
    named by several is emitted once)."""
    text = re.sub(r"'[^'\n]*'", "''", code(verb))  # names, not the words of messages
    defined = FUNCTION.findall(text)
    assert len(defined) == len(set(defined)), verb
    for name in defined:
        assert len(re.findall(rf"\b{name}\b", text)) >= 2, f"{verb} defines {name}, never uses it"
    for name in INCLUDES:
        if re.search(rf"\b{name}\b", text):
            assert name in defined, f"{verb} uses {name} without including it"
    for name in re.findall(r"^local ([A-Z]+) = P \.\. ", text, re.M):
        assert len(re.findall(rf"\b{name}\b", text)) >= 2, f"{verb} declares {name}, never uses it"


def test_every_include_is_used_and_each_file_holds_the_function_it_is_named_after() -> None:
    used: set[str] = set()
    for verb in VERBS:
        used |= set(FUNCTION.findall(code(verb)))
    for name in INCLUDES:
        text = read_lua("codemojex.lanes", f"includes/{name}")
        assert name in FUNCTION.findall(text), name
        assert name in used, f"no verb includes {name}"


def test_the_hot_path_carries_a_handful_of_functions() -> None:
    """The reason for includes: wclaim and ack_many define only what they run (before, every
    script carried the 29 functions of one shared prelude). `job_get` reads a job hash in its
    layout, `job_set` writes it in that layout, `job_long` names a field of the older one;
    none rewrites a hash (`upgrade_job`: repair's alone)."""
    assert set(FUNCTION.findall(code("wclaim"))) == {
        "now_ms", "pending_changed", "head_changed", "serve", "job_key", "pending_key",
        "lane_ring_key", "job_get", "job_set", "job_long",
    }  # fmt: skip
    assert set(FUNCTION.findall(code("ack_many"))) == {
        "ack_pairs", "holder", "permit_freed", "is_paused", "ring_room", "wake", "job_key",
        "lane_ring_key", "job_get", "job_long",
    }  # fmt: skip


def test_only_repair_rewrites_a_job_hash_into_the_current_layout() -> None:
    """Readers never rewrite a job hash: an older worker serving the same queue during a
    rolling deploy reads the long names, and would drop a job it found rewritten."""
    for verb in VERBS:
        uses = "upgrade_job" in FUNCTION.findall(code(verb))
        assert uses == (verb == "repair"), verb


def test_the_scripts_spell_the_job_fields_of_keys_py() -> None:
    """upgrade_job and job_long map the older layout's names onto keys.JOB_FIELDS."""
    text = read_lua("codemojex.lanes", "includes/upgrade_job")
    long, short = re.findall(r"local (?:long|short) = \{(.*?)\}", text, flags=re.S)
    assert re.findall(r"'(\w+)'", long) == list(K.JOB_FIELDS)
    assert re.findall(r"'(\w+)'", short) == list(K.JOB_FIELDS.values())
    text = read_lua("codemojex.lanes", "includes/job_long")
    pairs = re.findall(r"(\w) = '(\w+)'", text)
    assert {long: short for short, long in pairs} == K.JOB_FIELDS


# -- the include mechanism ---------------------------------------------------------------------


def test_includes_resolve_transitively_dependencies_first_and_once_each() -> None:
    files = {
        "a": '--- @include "b"\n--- @include "c"\nlocal function a() return b() + c() end\n',
        "b": '--- @include "c"\nlocal function b() return c() end\n',
        "c": "local function c() return 1 end\n",
    }
    text = resolve('--- @include "a"\n--- @include "c"\nreturn a()\n', files.__getitem__)
    assert text == (
        "local function c() return 1 end\n"
        "local function b() return c() end\n"
        "local function a() return b() + c() end\n"
        "return a()\n"
    )


def test_a_circular_or_missing_include_is_an_error_naming_the_chain() -> None:
    files = {"a": '--- @include "b"\n', "b": '--- @include "a"\n'}

    def read(name: str) -> str:
        if name not in files:
            raise FileNotFoundError(name)
        return files[name]

    with pytest.raises(IncludeError, match="circular include: a -> b -> a"):
        resolve('--- @include "a"\n', read)
    with pytest.raises(IncludeError, match="include not found: 'nope'"):
        resolve('--- @include "nope"\n', read)


def test_admit_reaches_the_ring_scan_only_past_a_live_count_at_the_new_ceiling() -> None:
    text = read_lua("codemojex.lanes", "admit")
    early = text.index("if act < ceiling then")
    assert text.count("room_recheck(") == 1
    assert text.index("room_recheck(") > text.index("return", early)
    assert text.index("room_recheck(") < text.index("local function refused_by")


# -- key names -----------------------------------------------------------------------------

PREFIXED = re.compile(r"P \.\. '([^']*)'")


def test_key_names_are_spelled_only_in_keys_py() -> None:
    """The scripts' key names are rendered from keys.py (`lua_names`): no Lua file spells
    one (the survey only matches the prefix to SCAN it), and each rendered name builds the
    key the Python builder does."""
    from codemojex.lanes.keys import PER_ID, SINGLE, Keys, lua_names

    for name in [*VERBS, *(f"includes/{i}" for i in INCLUDES)]:
        assert PREFIXED.findall(read_lua("codemojex.lanes", name)) in ([], ["*"]), name
    keys = Keys("q")
    names = lua_names()
    for suffix in SINGLE:
        assert getattr(keys, suffix) == keys.prefix + suffix
        assert names[suffix.upper()] == f"local {suffix.upper()} = P .. '{suffix}'"
    ident = {"job": "JOB" + "0" * 26, "pending": "PLR" + "0" * 26, "dedupe": "0" * 32}
    for builder in PER_ID:
        value = ident.get(builder, "ROM" + "0" * 26)
        python = getattr(keys, builder)(value) if builder != "dedupe" else keys.dedupe("x")
        value = python.rpartition(":")[2] if builder == "dedupe" else value
        lua = names[f"{builder}_key"]
        pieces = [p for p in python.removeprefix(keys.prefix).split(value) if p]
        assert re.findall(r"'([^']*)'", lua) == pieces, builder
        assert keys.parse(python) == (builder, value)


def test_a_rooms_snapshot_reads_its_lanes_with_work_not_every_lane_it_had() -> None:
    """snapshot finds a room's lanes on its lane ring and in its held set, never in the set
    of every lane bound to the room (test_retention.py counts the commands it runs)."""
    snapshot = code("snapshot")
    assert "room_lanes_key" not in snapshot
    assert "lane_ring_key(room)" in snapshot and "room_held_key(room)" in snapshot
