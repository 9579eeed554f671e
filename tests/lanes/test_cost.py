"""The cost rule, read off the scripts: nothing on the enqueue/claim/ack path (nor the
maintenance: reap, promote, retain) scans a ring or a list of lanes.

Every Redis command a hot verb can run (its own file plus every helper of _common.lua it
reaches) is listed; none may be LPOS, LRANGE, SCAN, KEYS, HGETALL or SMEMBERS, every
LREM must be `LREM key -1 x` (it stops at the tail, where the LMOVE just put x) and every
ZRANGE must read one head (`ZRANGE key, 0, 0`: O(log n), the operators' books).
"""

from __future__ import annotations

import re

import pytest

from codemojex.lanes.scripts import _read

HOT = [
    "enqueue", "admit", "claim", "wclaim", "ack", "ack_many", "ack_wclaim", "ack_wclaims",
    "retry", "extend", "reap", "promote", "retain",
]  # fmt: skip
SCANNING = {"LPOS", "LRANGE", "SCAN", "KEYS", "HGETALL", "SMEMBERS", "ZRANGE", "HKEYS"}
CALL = re.compile(r"redis\.call\('([A-Z]+)'([^)]*)\)")
FUNCTION = re.compile(r"^local function (\w+)\(", re.M)


def helpers() -> dict[str, str]:
    common = _read("_common")
    starts = [(m.start(), m.group(1)) for m in FUNCTION.finditer(common)]
    bodies = {}
    for (start, name), (end, _) in zip(starts, [*starts[1:], (len(common), "")], strict=True):
        bodies[name] = common[start:end]
    return bodies


# admit's one way to a scan: a room found without a ceiling while holding as many jobs in
# flight as the ceiling it gets leaves the ring as `limit` would take it off (LREM ring 0),
# once; any room below its new ceiling (every room on the steady path) gets it with one HSET.
RARE: dict[str, set[str]] = {"admit": {"room_recheck"}}


def reachable(source: str, bodies: dict[str, str], skip: frozenset[str] = frozenset()) -> str:
    """The text of `source` plus every helper it calls, transitively (not those in `skip`)."""
    seen: set[str] = set(skip)
    todo = [source]
    text = ""
    while todo:
        chunk = todo.pop()
        text += chunk
        for name, body in bodies.items():
            if name not in seen and re.search(rf"\b{name}\(", chunk):
                seen.add(name)
                todo.append(body)
    return text


@pytest.mark.parametrize("verb", HOT)
def test_hot_verbs_never_scan(verb: str) -> None:
    text = reachable(_read(verb), helpers(), frozenset(RARE.get(verb, ())))
    calls = CALL.findall(text)
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
    calls = CALL.findall(reachable(_read("stats"), helpers()))
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
    bodies = helpers()
    scanning = {n for n, b in bodies.items() if re.search(r"'LREM', \w+, 0", b)}
    assert scanning == {"room_recheck", "lane_unring"}
    for verb in HOT:
        rare = frozenset(RARE.get(verb, ()))
        text = reachable(_read(verb), bodies, rare)
        assert not any(re.search(rf"\b{n}\(", text) for n in scanning - rare), verb


def test_admit_reaches_the_ring_scan_only_past_a_live_count_at_the_new_ceiling() -> None:
    source = _read("admit")
    early = source.index("if act < ceiling then")
    assert source.count("room_recheck(") == 1
    assert source.index("room_recheck(") > source.index("return", early)
    assert source.index("room_recheck(") < source.index("local function refused_by")


# -- key names -----------------------------------------------------------------------------

PREFIXED = re.compile(r"P \.\. '([^']*)'")


def test_key_names_are_built_only_in_common_and_agree_with_keys_py() -> None:
    """The scripts build key names in _common.lua alone, from the suffixes of keys.py."""
    from codemojex.lanes.keys import SINGLE, Keys
    from codemojex.lanes.scripts import VERBS

    common = _read("_common")
    suffixes = set(PREFIXED.findall(common))
    singles = {s for s in suffixes if not s.endswith(":")}
    assert singles == set(SINGLE)
    # the per-job/lane/room names: the builders of _common.lua and of keys.py must agree
    keys, job, lane, room = Keys("q"), "JOB" + "0" * 26, "PLR" + "0" * 26, "ROM" + "0" * 26
    shapes = [
        ("'job:' .. id", keys.job(job), job),
        ("'g:' .. lane .. ':pending'", keys.pending(lane), lane),
        ("'r:' .. room .. ':ring'", keys.room_ring(room), room),
        ("'r:' .. room .. ':lanes'", keys.room_lanes(room), room),
        ("'r:' .. room .. ':held'", keys.room_held(room), room),
        ("'dd:' .. digest", keys.dedupe("x"), keys.dedupe("x").rpartition(":")[2]),
    ]
    for lua, python, ident in shapes:
        assert f"P .. {lua}" in common
        python_pieces = [p for p in python.removeprefix(keys.prefix).split(ident) if p]
        assert re.findall(r"'([^']*)'", lua) == python_pieces
    # no verb builds a name of its own (the survey only matches the prefix to SCAN it)
    for verb in [*VERBS, "_survey"]:
        assert PREFIXED.findall(_read(verb)) in ([], ["*"]), verb


def test_a_rooms_snapshot_reads_its_lanes_with_work_not_every_lane_it_had() -> None:
    """snapshot finds a room's lanes on its lane ring and in its held set, never in the set
    of every lane bound to the room (test_retention.py counts the commands it runs)."""
    snapshot = _read("snapshot")
    assert "room_lanes_key" not in snapshot
    assert "lane_ring_key(room)" in snapshot and "room_held_key(room)" in snapshot
