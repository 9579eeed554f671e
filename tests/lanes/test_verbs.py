"""Every verb and every edge of lanes.md, each asserting the exact keyspace afterwards.

Runs on the real Redis and on fakeredis (`any_redis`). Lease and retry times are moved by
rewriting scores in `active` / `delayed`, never by sleeping.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any
from unittest.mock import ANY

import pytest
import redis.asyncio as aioredis

from codemojex.lanes import Job, LaneError, LaneFull, Lanes
from codemojex.lanes import keys as K
from codemojex.lanes.facade import DEDUPE_WINDOW_S, DedupeWindowS
from codemojex.values import ids
from codemojex.values.bounds import limits_of
from tests.conftest import REDIS_URL
from tests.lanes.conftest import Env

GOOD_ROOM = "ROM" + "0" * 26
GOOD_LANE = "PLR" + "0" * 26


def room() -> str:
    return ids.mint(ids.ROOM)


def lane() -> str:
    return ids.mint(ids.PLAYER)


def jobh(
    payload: str,
    r: str,
    ln: str,
    seq: int,
    *,
    attempts: int = 0,
    max_attempts: int = 5,
    state: str = "pending",
    last_error: str | None = None,
) -> dict[str, Any]:
    """A job hash as Redis holds it (keys.JOB_FIELDS): attempts absent until the first lease."""
    h: dict[str, Any] = {
        "payload": payload,
        "room": r,
        "lane": ln,
        "seq": str(seq),
        "max_attempts": str(max_attempts),
        "state": state,
        "enqueued_ms": ANY,
    }
    if attempts:
        h["attempts"] = str(attempts)
    if last_error is not None:
        h["last_error"] = last_error
    return {K.JOB_FIELDS[name]: value for name, value in h.items()}


async def test_enqueue_writes_the_documented_keys(env: Env) -> None:
    r, ln = room(), lane()
    jid = await env.lanes.enqueue(r, ln, b"p1")
    assert ids.is_valid(jid, ids.JOB)
    assert await env.dump() == {
        "seq": "1",
        f"job:{jid}": jobh("p1", r, ln, 1),
        f"g:{ln}:pending": [(jid, 1)],
        "lroom": {ln: r},
        "lseen": [(ln, ANY)],
        f"r:{r}:lanes": {ln},
        f"r:{r}:ring": [ln],
        "ring": [r],
        "wake": ["1"],
        # the operators' books: pending in all, per room, each lane's head; last enqueue
        "npending": "1",
        "rdepth": [(r, 1)],
        "lhead": [(ln, 1)],
        "rseen": [(r, ANY)],
    }
    # a second job of the same lane changes no ring and pushes no wake
    j2 = await env.lanes.enqueue(r, ln, b"p2", max_attempts=3)
    d = await env.dump()
    assert d[f"g:{ln}:pending"] == [(jid, 1), (j2, 2)]
    assert d[f"job:{j2}"] == jobh("p2", r, ln, 2, max_attempts=3)
    assert d["ring"] == [r] and d[f"r:{r}:ring"] == [ln] and d["wake"] == ["1"]
    assert (d["npending"], d["rdepth"], d["lhead"]) == ("2", [(r, 2)], [(ln, 1)])
    assert await env.lanes.check() == []


async def test_caller_job_id_is_kept_and_idempotent(env: Env) -> None:
    r, ln = room(), lane()
    jid = ids.mint(ids.JOB)
    assert await env.lanes.enqueue(r, ln, b"x", job_id=jid) == jid
    before = await env.dump()
    assert await env.lanes.enqueue(r, ln, b"x", job_id=jid) == jid
    assert await env.dump() == before
    with pytest.raises(LaneError, match="already exists in lane"):
        await env.lanes.enqueue(r, lane(), b"x", job_id=jid)
    assert await env.dump() == before


async def test_claim_then_ack_leaves_only_the_books(env: Env) -> None:
    r, ln = room(), lane()
    jid = await env.lanes.enqueue(r, ln, b"p")
    job = await env.lanes.claim(30_000)
    assert job is not None
    assert (job.id, job.room, job.lane, job.payload, job.attempts) == (jid, r, ln, b"p", 1)
    assert (job.max_attempts, job.seq) == (5, 1)
    assert await env.dump() == {
        "seq": "1",
        f"job:{jid}": jobh("p", r, ln, 1, attempts=1, state="active"),
        "active": [(jid, ANY)],
        "gactive": {r: "1"},
        "lroom": {ln: r},
        "lseen": [(ln, ANY)],
        f"r:{r}:lanes": {ln},
        "wake": ["1"],
        "rseen": [(r, ANY)],
    }
    assert await env.lanes.claim(30_000) is None
    assert await env.lanes.ack(job) is True
    assert await env.dump() == {
        "seq": "1",
        "lroom": {ln: r},
        "lseen": [(ln, ANY)],
        f"r:{r}:lanes": {ln},
        "wake": ["1"],
        "rseen": [(r, ANY)],
    }
    assert await env.lanes.ack(job) is False
    assert await env.lanes.check() == []


async def test_two_level_rotation(env: Env) -> None:
    a, b = room(), room()
    a1, a2, b1 = lane(), lane(), lane()
    for payload, (r, ln) in [
        ("a1-1", (a, a1)),
        ("a1-2", (a, a1)),
        ("b1-1", (b, b1)),
        ("a1-3", (a, a1)),
        ("a2-1", (a, a2)),
        ("b1-2", (b, b1)),
    ]:
        await env.lanes.enqueue(r, ln, payload.encode())
    served = []
    while (job := await env.lanes.claim(30_000)) is not None:
        served.append(job.payload.decode())
        assert await env.lanes.check() == []
    # rooms alternate; inside room a, lanes alternate; within a lane, mint order
    assert served == ["a1-1", "b1-1", "a2-1", "b1-2", "a1-2", "a1-3"]


async def test_ceiling_reached_and_freed(env: Env) -> None:
    r, other, ln, lo = room(), room(), lane(), lane()
    await env.lanes.limit(r, 2)
    jids = [await env.lanes.enqueue(r, ln, f"p{i}".encode()) for i in range(3)]
    j1 = await env.lanes.claim(30_000)
    j2 = await env.lanes.claim(30_000)
    assert j1 is not None and j2 is not None and [j1.id, j2.id] == jids[:2]
    d = await env.dump()
    assert "ring" not in d  # at its ceiling: off the room ring
    assert d[f"r:{r}:ring"] == [ln]  # its lane ring is kept
    assert d["gactive"] == {r: "2"} and d["glimit"] == {r: "2"}
    assert await env.lanes.claim(30_000) is None
    oj = await env.lanes.enqueue(other, lo, b"o")
    got = await env.lanes.claim(30_000)
    assert got is not None and got.id == oj
    wakes = len(d["wake"])
    assert await env.lanes.ack(j1) is True
    d = await env.dump()
    assert d["ring"] == [r] and d["gactive"] == {r: "1", other: "1"}
    assert len(d["wake"]) == wakes + 2  # other's enqueue, then the freed permit
    j3 = await env.lanes.claim(30_000)
    assert j3 is not None and j3.id == jids[2]
    assert await env.lanes.check() == []


async def test_lowering_the_ceiling_below_the_live_count(env: Env) -> None:
    r, ln = room(), lane()
    for i in range(5):
        await env.lanes.enqueue(r, ln, f"p{i}".encode())
    held = [await env.lanes.claim(30_000) for _ in range(3)]
    jobs = [j for j in held if j is not None]
    assert len(jobs) == 3
    assert (await env.dump())["ring"] == [r]
    await env.lanes.limit(r, 1)
    d = await env.dump()
    assert "ring" not in d and d[f"r:{r}:ring"] == [ln] and d["gactive"] == {r: "3"}
    assert await env.lanes.claim(30_000) is None
    await env.lanes.ack(jobs[0])
    await env.lanes.ack(jobs[1])
    d = await env.dump()
    assert "ring" not in d and d["gactive"] == {r: "1"}  # 1 in flight, ceiling 1: parked
    await env.lanes.ack(jobs[2])
    d = await env.dump()
    assert d["ring"] == [r] and "gactive" not in d
    assert await env.lanes.check() == []
    # raising a ceiling puts a parked room back at once
    j = await env.lanes.claim(30_000)
    assert j is not None and "ring" not in await env.dump()
    await env.lanes.limit(r, 2)
    assert (await env.dump())["ring"] == [r]
    await env.lanes.unlimit(r)
    assert "glimit" not in await env.dump()
    assert await env.lanes.check() == []


async def test_weight_clamps_by_depth_and_by_headroom(env: Env) -> None:
    r, ln = room(), lane()
    await env.lanes.weight(ln, 5)
    jids = [await env.lanes.enqueue(r, ln, f"p{i}".encode()) for i in range(3)]
    batch = await env.lanes.wclaim(30_000)
    assert [j.id for j in batch] == jids  # depth 3 clamps weight 5
    assert {j.attempts for j in batch} == {1}
    d = await env.dump()
    assert len({score for _, score in d["active"]}) == 1  # one shared deadline
    assert d == {
        "seq": "3",
        **{
            f"job:{j}": jobh(f"p{i}", r, ln, i + 1, attempts=1, state="active")
            for i, j in enumerate(jids)
        },
        "active": [(j, ANY) for j in jids],
        "gactive": {r: "3"},
        "gweight": {ln: "5"},
        "lroom": {ln: r},
        "lseen": [(ln, ANY)],
        f"r:{r}:lanes": {ln},
        "wake": ["1"],
        "rseen": [(r, ANY)],
    }  # the lane, emptied, left both rings (and the books of pending jobs)
    assert await env.lanes.ack_many(batch) == 3

    await env.lanes.limit(r, 4)
    jids = [await env.lanes.enqueue(r, ln, f"q{i}".encode()) for i in range(10)]
    first = await env.lanes.claim(30_000)
    assert first is not None and first.id == jids[0]
    batch = await env.lanes.wclaim(30_000)
    assert [j.id for j in batch] == jids[1:4]  # headroom 4 - 1 = 3 clamps weight 5
    d = await env.dump()
    assert d["gactive"] == {r: "4"} and "ring" not in d and d[f"r:{r}:ring"] == [ln]
    assert await env.lanes.wclaim(30_000) == []
    await env.lanes.weight(ln, 1)
    assert "gweight" not in await env.dump()
    assert await env.lanes.check() == []


async def test_pause_room_keeps_its_lane_ring_and_accepts_jobs(env: Env) -> None:
    r, ln, ln2 = room(), lane(), lane()
    j1 = await env.lanes.enqueue(r, ln, b"a")
    await env.lanes.pause(r)
    d = await env.dump()
    assert "ring" not in d and d[f"r:{r}:ring"] == [ln] and d["paused"] == {r}
    j2 = await env.lanes.enqueue(r, ln2, b"b")  # still accepted, joins the lane ring
    d = await env.dump()
    assert "ring" not in d and d[f"r:{r}:ring"] == [ln, ln2]
    assert d[f"g:{ln2}:pending"] == [(j2, 2)]
    assert await env.lanes.claim(30_000) is None
    wakes = len(d["wake"])
    await env.lanes.resume(r)
    d = await env.dump()
    assert d["ring"] == [r] and "paused" not in d and len(d["wake"]) == wakes + 1
    got = [await env.lanes.claim(30_000), await env.lanes.claim(30_000)]
    assert [j.id for j in got if j] == [j1, j2]
    assert await env.lanes.check() == []


async def test_pause_lane_leaves_the_room_served_by_its_other_lanes(env: Env) -> None:
    r, ln, ln2 = room(), lane(), lane()
    j1 = await env.lanes.enqueue(r, ln, b"a")
    await env.lanes.pause(ln)
    d = await env.dump()
    # its only lane paused: the lane leaves the lane ring and the room the room ring
    assert "ring" not in d and f"r:{r}:ring" not in d and d["paused"] == {ln}
    j0 = await env.lanes.enqueue(r, ln, b"a2")  # accepted, kept off the ring
    assert "ring" not in await env.dump()
    j2 = await env.lanes.enqueue(r, ln2, b"b")
    d = await env.dump()
    assert d["ring"] == [r] and d[f"r:{r}:ring"] == [ln2]
    got = await env.lanes.claim(30_000)
    assert got is not None and got.id == j2
    assert await env.lanes.claim(30_000) is None
    await env.lanes.resume(ln)
    d = await env.dump()
    assert d["ring"] == [r] and d[f"r:{r}:ring"] == [ln] and "paused" not in d
    assert d[f"g:{ln}:pending"] == [(j1, 1), (j0, 2)]
    await env.lanes.pause(ln)
    await env.lanes.pause(ln)  # twice is once
    assert (await env.dump())["paused"] == {ln}
    await env.lanes.resume(ln)
    await env.lanes.resume(ln)
    assert await env.lanes.check() == []


async def test_queue_pause_answers_empty_and_keeps_the_rings(env: Env) -> None:
    r, ln = room(), lane()
    await env.lanes.enqueue(r, ln, b"a")
    before = await env.dump()
    await env.lanes.pause_queue()
    assert await env.lanes.claim(30_000) is None
    assert await env.lanes.wclaim(30_000) == []
    assert await env.dump() == {**before, "qpaused": "1"}
    await env.lanes.resume_queue()
    d = await env.dump()
    assert "qpaused" not in d and d["wake"] == ["1", "1"]
    assert await env.lanes.claim(30_000) is not None


async def test_stale_token_is_refused_and_changes_nothing(env: Env) -> None:
    r, ln = room(), lane()
    jid = await env.lanes.enqueue(r, ln, b"a")
    old = await env.lanes.claim(30_000)
    assert old is not None
    await env.expire(jid)
    assert await env.lanes.reap() == 1
    d = await env.dump()
    assert d[f"job:{jid}"] == jobh("a", r, ln, 1, attempts=1)
    assert d[f"g:{ln}:pending"] == [(jid, 1)] and "active" not in d and "gactive" not in d
    assert d["ring"] == [r] and d[f"r:{r}:ring"] == [ln]
    # fenced out while the job waits in its lane ...
    assert await env.lanes.ack(old) is False
    assert await env.lanes.retry(old, 0, "late") == "stale"
    assert await env.lanes.extend(old, 30_000) is False
    assert await env.lanes.ack_many([old]) == 0
    assert await env.dump() == d
    # ... and after it was claimed again
    new = await env.lanes.claim(30_000)
    assert new is not None and new.attempts == 2
    d = await env.dump()
    assert await env.lanes.ack(old) is False
    assert await env.lanes.retry(old, 0, "late") == "stale"
    assert await env.lanes.extend(old, 30_000) is False
    assert await env.dump() == d
    assert await env.lanes.ack(new) is True
    assert await env.lanes.check() == []


async def test_reap_to_dead_when_attempts_are_spent(env: Env) -> None:
    r, ln = room(), lane()
    jid = await env.lanes.enqueue(r, ln, b"a", max_attempts=1)
    assert await env.lanes.claim(30_000) is not None
    assert await env.lanes.reap() == 0  # not expired yet
    await env.expire(jid)
    assert await env.lanes.reap() == 1
    assert await env.dump() == {
        "seq": "1",
        f"job:{jid}": jobh(
            "a", r, ln, 1, attempts=1, max_attempts=1, state="dead", last_error="lease expired"
        ),
        "dead": [(jid, ANY)],
        "lroom": {ln: r},
        "lseen": [(ln, ANY)],
        f"r:{r}:lanes": {ln},
        "wake": ["1"],
        "rseen": [(r, ANY)],
    }
    assert await env.lanes.reap() == 0
    assert await env.lanes.check() == []


async def test_reaped_job_goes_back_at_its_original_seq(env: Env) -> None:
    r, ln = room(), lane()
    j1 = await env.lanes.enqueue(r, ln, b"a")
    await env.lanes.claim(30_000)
    j2 = await env.lanes.enqueue(r, ln, b"b")
    await env.expire(j1)
    assert await env.lanes.reap() == 1
    assert await env.dump() == {
        "seq": "2",
        f"job:{j1}": jobh("a", r, ln, 1, attempts=1),
        f"job:{j2}": jobh("b", r, ln, 2),
        f"g:{ln}:pending": [(j1, 1), (j2, 2)],
        "lroom": {ln: r},
        "lseen": [(ln, ANY)],
        f"r:{r}:lanes": {ln},
        f"r:{r}:ring": [ln],
        "ring": [r],
        "wake": ANY,
        "npending": "2",
        "rdepth": [(r, 2)],
        "lhead": [(ln, 1)],  # back at the head: the reaped job is the older
        "rseen": [(r, ANY)],
    }
    got = await env.lanes.claim(30_000)
    assert got is not None and got.id == j1 and got.attempts == 2


async def test_retry_to_delayed_then_promote_then_dead(env: Env) -> None:
    r, ln = room(), lane()
    j1 = await env.lanes.enqueue(r, ln, b"a", max_attempts=2)
    job = await env.lanes.claim(30_000)
    assert job is not None
    j2 = await env.lanes.enqueue(r, ln, b"b")
    assert await env.lanes.retry(job, 60_000, "boom") == "delayed"
    d = await env.dump()
    assert d[f"job:{j1}"] == jobh(
        "a", r, ln, 1, attempts=1, max_attempts=2, state="delayed", last_error="boom"
    )
    assert d["delayed"] == [(j1, ANY)] and "gactive" not in d and "active" not in d
    assert await env.lanes.promote() == 0  # not due yet
    await env.make_due(j1)
    assert await env.lanes.promote() == 1
    d = await env.dump()
    assert d[f"g:{ln}:pending"] == [(j1, 1), (j2, 2)] and "delayed" not in d
    assert d[f"job:{j1}"]["t"] == "pending"
    job = await env.lanes.claim(30_000)
    assert job is not None and job.id == j1 and job.attempts == 2
    assert await env.lanes.retry(job, 60_000, "boom again") == "dead"
    d = await env.dump()
    assert d["dead"] == [(j1, ANY)] and d[f"job:{j1}"]["x"] == "boom again"
    assert d[f"job:{j1}"]["t"] == "dead" and "gactive" not in d
    assert await env.lanes.check() == []


async def test_promote_brings_an_emptied_room_back_with_a_wake(env: Env) -> None:
    r, ln = room(), lane()
    j1 = await env.lanes.enqueue(r, ln, b"a")
    job = await env.lanes.claim(30_000)
    assert job is not None
    await env.lanes.retry(job, 60_000, "x")
    assert "ring" not in await env.dump()
    await env.make_due(j1)
    await env.lanes.promote()
    d = await env.dump()
    assert d["ring"] == [r] and d[f"r:{r}:ring"] == [ln] and d["wake"] == ["1", "1"]


async def test_extend_moves_the_deadline(env: Env) -> None:
    r, ln = room(), lane()
    jid = await env.lanes.enqueue(r, ln, b"a")
    job = await env.lanes.claim(1_000)
    assert job is not None
    held = await env.dump()
    (_, before), *_ = held["active"]
    assert await env.lanes.extend(job, 600_000) is True
    extended = await env.dump()
    (member, after), *_ = extended["active"]
    assert member == jid and after >= before + 599_000
    assert extended == {**held, "active": [(jid, after)]}  # only the deadline moved


async def test_reassign_keeps_mint_order_and_refuses_another_room(env: Env) -> None:
    r, a, b = room(), lane(), lane()
    ja1 = await env.lanes.enqueue(r, a, b"a1")
    jb2 = await env.lanes.enqueue(r, b, b"b2")
    ja3 = await env.lanes.enqueue(r, a, b"a3")
    jb4 = await env.lanes.enqueue(r, b, b"b4")
    assert await env.lanes.reassign(ja3, b) is True
    d = await env.dump()
    assert d[f"g:{b}:pending"] == [(jb2, 2), (ja3, 3), (jb4, 4)]
    assert d[f"g:{a}:pending"] == [(ja1, 1)] and d[f"job:{ja3}"]["l"] == b
    assert await env.lanes.reassign(ja1, b) is True  # a empties: leaves the lane ring
    d = await env.dump()
    assert d[f"g:{b}:pending"] == [(ja1, 1), (jb2, 2), (ja3, 3), (jb4, 4)]
    assert f"g:{a}:pending" not in d and d[f"r:{r}:ring"] == [b] and d["ring"] == [r]
    # a lane of another room is refused, nothing changes
    other, foreign = room(), lane()
    await env.lanes.enqueue(other, foreign, b"o")
    d = await env.dump()
    with pytest.raises(LaneError, match="cannot reassign"):
        await env.lanes.reassign(jb2, foreign)
    assert await env.dump() == d
    # a new lane is bound to the job's room; a lane can be emptied and refilled
    fresh = lane()
    assert await env.lanes.reassign(jb2, fresh) is True
    d = await env.dump()
    assert d["lroom"][fresh] == r and d[f"r:{r}:lanes"] == {a, b, fresh}
    assert d[f"r:{r}:ring"] == [b, fresh]
    # only a pending job moves
    job = await env.lanes.claim(30_000)
    assert job is not None
    assert await env.lanes.reassign(job.id, a) is False
    assert await env.lanes.reassign(ids.mint(ids.JOB), a) is False
    assert await env.lanes.check() == []


async def test_purge_kills_pending_and_spares_in_flight(env: Env) -> None:
    r, ln, other = room(), lane(), lane()
    jids = [await env.lanes.enqueue(r, ln, f"p{i}".encode()) for i in range(4)]
    held = await env.lanes.claim(30_000)
    assert held is not None and held.id == jids[0]
    jo = await env.lanes.enqueue(r, other, b"o")
    assert await env.lanes.purge(ln) == 3
    d = await env.dump()
    assert f"g:{ln}:pending" not in d and d[f"r:{r}:ring"] == [other] and d["ring"] == [r]
    assert {m for m, _ in d["dead"]} == set(jids[1:])
    for jid, i in zip(jids[1:], range(1, 4), strict=True):
        assert d[f"job:{jid}"] == jobh(f"p{i}", r, ln, i + 1, state="dead", last_error="purged")
    assert d["active"] == [(held.id, ANY)]
    assert await env.lanes.purge(ln) == 0
    await env.lanes.purge(other)
    d = await env.dump()
    assert "ring" not in d and f"r:{r}:ring" not in d and {m for m, _ in d["dead"]} > {jo}
    assert await env.lanes.ack(held) is True
    assert await env.lanes.check() == []


async def test_dedupe_returns_the_first_job(env: Env) -> None:
    r, ln = room(), lane()
    first = await env.lanes.enqueue(r, ln, b"a", dedupe_key="update:42")
    before = await env.dump()
    dd = [k for k in before if k.startswith("dd:")]
    assert len(dd) == 1 and before[dd[0]] == first
    assert "42" not in dd[0]  # only a digest of the caller's text reaches the key name
    again = await env.lanes.enqueue(r, ln, b"a", dedupe_key="update:42")
    assert again == first and await env.dump() == before
    ttl = await env.client.pttl(env.keys.prefix + dd[0])
    window = DEDUPE_WINDOW_S * 1000  # minutes: as long as redelivery needs
    assert window - 60_000 < ttl <= window <= 3600 * 1000
    job = await env.lanes.claim(30_000)
    assert job is not None
    await env.lanes.ack(job)
    assert await env.lanes.enqueue(r, ln, b"a", dedupe_key="update:42") == first
    other = await env.lanes.enqueue(r, ln, b"a", dedupe_key="update:43")
    assert other != first


async def test_depth_limit_raises_lane_full_and_writes_nothing(env: Env) -> None:
    r, ln = room(), lane()
    await env.lanes.enqueue(r, ln, b"a", max_depth=2)
    await env.lanes.enqueue(r, ln, b"b", max_depth=2)
    before = await env.dump()
    with pytest.raises(LaneFull, match="already holds 2 pending jobs"):
        await env.lanes.enqueue(r, ln, b"c", max_depth=2)
    assert await env.dump() == before
    assert isinstance(LaneFull("x"), LaneError)
    await env.lanes.enqueue(r, lane(), b"c", max_depth=2)  # other lanes are not affected


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("ROM123", GOOD_LANE, b"x"), "not a room id"),
        ((GOOD_ROOM, "emq:{x}:*", b"x"), "not a lane id"),
        ((GOOD_ROOM, GOOD_LANE, "text"), "bytes"),
        ((GOOD_LANE, GOOD_LANE, b"x"), "not a room"),
        ((GOOD_ROOM.lower(), GOOD_LANE, b"x"), "not a room"),
        ((GOOD_ROOM[:-1] + "U", GOOD_LANE, b"x"), "not a room"),
    ],
)
async def test_invalid_ids_are_refused_and_nothing_is_written(
    env: Env, args: tuple[Any, ...], message: str
) -> None:
    with pytest.raises(LaneError, match=message):
        await env.lanes.enqueue(*args)
    assert await env.dump() == {}


async def test_every_verb_validates_before_writing(env: Env) -> None:
    r, ln = room(), lane()
    bad_job = Job("JOB1", r, ln, b"", 1, 5, 1, 0)
    cases = [
        env.lanes.enqueue(r, ln, b"x", job_id="JOB-not-an-id"),
        env.lanes.enqueue(r, ln, b"x", max_attempts=0),
        env.lanes.enqueue(r, ln, b"x", max_depth=0),
        env.lanes.enqueue(r, ln, b"x", dedupe_key=""),
        env.lanes.limit("ROM", 3),
        env.lanes.limit(r, 0),
        env.lanes.limit(r, -1),
        env.lanes.limit(r, 99999999999999999999),
        env.lanes.unlimit(ln),
        env.lanes.weight(ln, 0),
        env.lanes.weight(r, 2),
        env.lanes.pause("JOB" + "0" * 26),
        env.lanes.resume("garbage"),
        env.lanes.reassign("nope", ln),
        env.lanes.reassign(ids.mint(ids.JOB), r),
        env.lanes.purge(r),
        env.lanes.snapshot("nope"),
        env.lanes.claim(0),
        env.lanes.wclaim(-5),
        env.lanes.retry(bad_job, -1, "x"),
    ]
    for coro in cases:
        with pytest.raises(LaneError):
            await coro
    with pytest.raises(LaneError, match="queue name"):
        Lanes(env.client, "Bad Queue!")
    assert await env.dump() == {}


async def test_verbs_given_a_job_validate_it_before_touching_anything(env: Env) -> None:
    r, ln = room(), lane()
    await env.lanes.enqueue(r, ln, b"x")
    held = await env.lanes.claim(60_000)
    assert held is not None
    before = await env.dump()
    forged = [
        dataclasses.replace(held, id="x}:evil*"),
        dataclasses.replace(held, id=ids.mint(ids.ROOM)),
        dataclasses.replace(held, attempts="1"),  # type: ignore[arg-type]
        dataclasses.replace(held, attempts=True),
        dataclasses.replace(held, attempts=-1),
    ]
    for bad in forged:
        cases = [
            env.lanes.ack(bad),
            env.lanes.ack_many([held, bad]),  # the good one is not acked either
            env.lanes.ack_many([held] * 1_000 + [bad]),  # nor a first chunk
            env.lanes.ack_wclaim([held, bad], 60_000),
            env.lanes.ack_wclaims([held, bad], 60_000, 4),
            env.lanes.retry(bad, 10, "x"),
            env.lanes.extend(bad, 60_000),
        ]
        for coro in cases:
            with pytest.raises(LaneError):
                await coro
    assert await env.dump() == before
    assert await env.lanes.ack(held)


async def test_a_lane_belongs_to_one_room_for_life(env: Env) -> None:
    r1, r2, ln = room(), room(), lane()
    await env.lanes.enqueue(r1, ln, b"a")
    before = await env.dump()
    with pytest.raises(LaneError, match=f"belongs to room {r1}"):
        await env.lanes.enqueue(r2, ln, b"b")
    assert await env.dump() == before


async def test_wake_list_is_capped(env: Env) -> None:
    for _ in range(70):
        await env.lanes.enqueue(room(), lane(), b"x")
    d = await env.dump()
    assert len(d["wake"]) == 64 and len(d["ring"]) == 70
    assert await env.lanes.park(0.1) is True
    assert len((await env.dump())["wake"]) == 63


async def test_snapshot(env: Env) -> None:
    r, quiet, a, b = room(), room(), lane(), lane()
    await env.lanes.limit(r, 3)
    await env.lanes.weight(a, 4)
    for i in range(3):
        await env.lanes.enqueue(r, a, f"payload-of-a-{i}".encode())
    await env.lanes.enqueue(r, b, b"b")
    await env.lanes.pause(quiet)
    job = await env.lanes.claim(30_000)
    assert job is not None
    snap = await env.lanes.snapshot()
    assert snap == {
        "queue": env.queue,
        "paused": False,
        "ring": [r],
        "active": 1,
        "delayed": 0,
        "dead": 0,
        "rooms": {
            r: {
                "paused": False,
                "ceiling": 3,
                "in_flight": 1,
                "ring": [b, a],
                "pending": 3,
                "lanes": {
                    a: {"depth": 2, "weight": 4, "paused": False},
                    b: {"depth": 1, "weight": 1, "paused": False},
                },
            },
            quiet: {
                "paused": True,
                "ceiling": None,
                "in_flight": 0,
                "ring": [],
                "pending": 0,
                "lanes": {},
            },
        },
    }
    one = await env.lanes.snapshot(r)
    assert one["rooms"] == {r: snap["rooms"][r]} and one["ring"] == [r]
    assert "payload-of-a" not in repr(snap)  # payloads never appear in a snapshot


async def test_ack_many_counts_only_live_tokens(env: Env) -> None:
    r, ln = room(), lane()
    await env.lanes.weight(ln, 3)
    for i in range(3):
        await env.lanes.enqueue(r, ln, f"p{i}".encode())
    batch = await env.lanes.wclaim(30_000)
    assert len(batch) == 3
    await env.expire(batch[0].id)
    await env.lanes.reap()
    assert await env.lanes.ack_many(batch) == 2
    d = await env.dump()
    assert "gactive" not in d and "active" not in d and d[f"g:{ln}:pending"] == [(batch[0].id, 1)]
    assert await env.lanes.check() == []


async def test_ack_many_frees_permits_once_per_job_and_rings_rooms_in_order(env: Env) -> None:
    r1, r2, l1, l2 = room(), room(), lane(), lane()
    for r, ln in ((r1, l1), (r2, l2)):
        await env.lanes.limit(r, 2)
        await env.lanes.weight(ln, 2)
        for i in range(3):
            await env.lanes.enqueue(r, ln, f"{i}".encode())
    b1 = await env.lanes.wclaim(30_000)
    b2 = await env.lanes.wclaim(30_000)
    assert [len(b1), len(b2)] == [2, 2] and "ring" not in await env.dump()
    # the same job twice counts once; rooms come back in the order they appear
    assert await env.lanes.ack_many([b2[0], *b1, b2[0], b2[1]]) == 4
    d = await env.dump()
    assert d["ring"] == [r2, r1] and "gactive" not in d and "active" not in d
    assert d["wake"] == ["1"] * 4
    assert await env.lanes.ack_many([]) == 0
    assert await env.lanes.check() == []


async def test_a_dedupe_window_is_bounded_as_its_setting_is(env: Env) -> None:
    """The lanes check a window with the setting's own bound type (an hour at most)."""
    hour_ms = limits_of(DedupeWindowS)["le"] * 1000
    assert Lanes(env.client, env.queue, dedupe_window_ms=hour_ms).dedupe_window_ms == hour_ms
    for wrong in (hour_ms + 1, 0, True, 1.5):
        with pytest.raises(LaneError, match="dedupe"):
            Lanes(env.client, env.queue, dedupe_window_ms=wrong)  # type: ignore[arg-type]


async def test_dedupe_window_ends(env: Env) -> None:
    short = Lanes(env.client, env.queue, dedupe_window_ms=5_000)
    r, ln = room(), lane()
    first = await short.enqueue(r, ln, b"a", dedupe_key="k")
    assert await short.enqueue(r, ln, b"a", dedupe_key="k") == first
    ttl = await env.client.pttl(env.keys.dedupe("k"))
    assert 0 < ttl <= 5_000
    await env.client.delete(env.keys.dedupe("k"))  # what the expiry does when the window ends
    second = await short.enqueue(r, ln, b"a", dedupe_key="k")
    assert second != first
    assert await env.dump() == {
        "seq": "2",
        f"job:{first}": jobh("a", r, ln, 1),
        f"job:{second}": jobh("a", r, ln, 2),
        f"g:{ln}:pending": [(first, 1), (second, 2)],
        f"dd:{env.keys.dedupe('k').rpartition(':')[2]}": second,
        "lroom": {ln: r},
        "lseen": [(ln, ANY)],
        f"r:{r}:lanes": {ln},
        f"r:{r}:ring": [ln],
        "ring": [r],
        "wake": ["1"],
        "npending": "2",
        "rdepth": [(r, 2)],
        "lhead": [(ln, 1)],
        "rseen": [(r, ANY)],
    }


async def test_ack_many_acks_a_live_token_listed_after_a_stale_one_of_the_same_job(
    env: Env,
) -> None:
    """Found by the model test: a lease ran out, the job was claimed again, and both copies
    (the stale token first) reached one ack_many. The live one counts, once."""
    r, ln = room(), lane()
    await env.lanes.enqueue(r, ln, b"x")
    first = await env.lanes.claim(30_000)
    assert first is not None
    await env.expire(first.id)
    assert await env.lanes.reap() == 1
    second = await env.lanes.claim(30_000)
    assert second is not None and second.attempts == first.attempts + 1
    assert await env.lanes.ack_many([first, second, second]) == 1
    assert await env.client.zcard(env.keys.active) == 0
    assert await env.lanes.check() == []


async def test_ack_wclaim_acks_first_then_claims_in_one_call(env: Env) -> None:
    """The ack of a finished batch frees its room's permit before the claim, so a room at
    its ceiling is served again by the same call; stale tokens count as not acked."""
    r, ln = room(), lane()
    await env.lanes.limit(r, 2)
    await env.lanes.weight(ln, 2)
    queued = [await env.lanes.enqueue(r, ln, f"p{i}".encode()) for i in range(5)]
    acked, first, more = await env.lanes.ack_wclaim([], 30_000)
    assert acked == 0 and [j.id for j in first] == queued[:2] and not more
    assert "ring" not in await env.dump()  # at its ceiling: parked
    stale = Job(first[0].id, r, ln, b"", first[0].attempts - 1, 5, 1, 0)
    acked, second, _ = await env.lanes.ack_wclaim([stale, *first], 30_000)
    assert acked == 2 and [j.id for j in second] == queued[2:4]
    d = await env.dump()
    assert d["gactive"] == {r: "2"} and sorted(m for m, _ in d["active"]) == sorted(queued[2:4])
    assert f"job:{queued[0]}" not in d and f"job:{queued[1]}" not in d
    acked, third, more = await env.lanes.ack_wclaim(second, 30_000)
    assert acked == 2 and [j.id for j in third] == queued[4:] and not more
    assert await env.lanes.check() == []
    # nothing left to claim: the acks still happen
    assert await env.lanes.ack_wclaim(third, 30_000) == (1, [], False)
    assert "active" not in await env.dump()
    assert await env.lanes.check() == []


async def test_ack_wclaim_acks_while_the_queue_is_paused(env: Env) -> None:
    r, ln = room(), lane()
    await env.lanes.enqueue(r, ln, b"a")
    await env.lanes.enqueue(r, ln, b"b")
    job = await env.lanes.claim(30_000)
    assert job is not None
    await env.lanes.pause_queue()
    assert await env.lanes.ack_wclaim([job], 30_000) == (1, [], False)
    await env.lanes.resume_queue()
    acked, jobs, _ = await env.lanes.ack_wclaim([], 30_000)
    assert acked == 0 and [j.payload for j in jobs] == [b"b"]


async def test_ack_wclaim_hint_says_whether_other_rooms_wait(env: Env) -> None:
    r1, r2, l1, l2 = room(), room(), lane(), lane()
    await env.lanes.enqueue(r1, l1, b"a")
    await env.lanes.enqueue(r2, l2, b"b")
    _, jobs, more = await env.lanes.ack_wclaim([], 30_000)
    assert [j.room for j in jobs] == [r1] and more
    _, jobs, more = await env.lanes.ack_wclaim(jobs, 30_000)
    assert [j.room for j in jobs] == [r2] and not more


async def test_ack_wclaims_is_n_ack_wclaims_in_one_call(env: Env) -> None:
    """A pool's round: the acks first (a freed permit serves its room again at once), then
    one rota step per batch wanted, as that many ack_wclaim calls would take them, stopping
    when the rota runs dry; the hint says whether the ring still holds work."""
    r1, r2, r3 = room(), room(), room()
    l1, l2, l3, l4 = lane(), lane(), lane(), lane()
    await env.lanes.limit(r1, 1)
    await env.lanes.weight(l2, 3)
    a = [await env.lanes.enqueue(r1, l1, f"a{i}".encode()) for i in range(3)]
    b = [await env.lanes.enqueue(r2, l2, f"b{i}".encode()) for i in range(4)]
    c = [await env.lanes.enqueue(r2, l3, f"c{i}".encode()) for i in range(1)]
    d = [await env.lanes.enqueue(r3, l4, f"d{i}".encode()) for i in range(2)]
    acked, batches, more = await env.lanes.ack_wclaims([], 30_000, 3)
    assert acked == 0 and more
    assert [[j.id for j in batch] for batch in batches] == [a[:1], b[:3], d[:1]]
    assert [(batch[0].room, batch[0].lane) for batch in batches] == [(r1, l1), (r2, l2), (r3, l4)]
    assert all(j.attempts == 1 and j.payload.decode()[0] in "abd" for bt in batches for j in bt)
    assert await env.lanes.check() == []
    # r1 sits at its ceiling until its job is acked; the ack comes first and frees it
    stale = Job(a[0], r1, l1, b"", 0, 5, 1, 0)
    acked, again, more = await env.lanes.ack_wclaims([stale, *batches[0]], 30_000, 10)
    assert acked == 1
    assert [[j.id for j in batch] for batch in again] == [c, d[1:], a[1:2], b[3:]]
    assert not more  # r1 is at its ceiling again, every other lane is empty
    assert await env.lanes.check() == []
    held = [*batches[1], *batches[2], *(j for batch in again for j in batch)]
    acked, none, more = await env.lanes.ack_wclaims(held, 30_000, 5)
    assert (acked, [[j.id for j in batch] for batch in none], more) == (8, [a[2:]], False)
    assert await env.lanes.ack_wclaims(none[0], 30_000, 0) == (1, [], False)
    assert "active" not in await env.dump()
    assert await env.lanes.check() == []


async def test_ack_wclaims_acks_while_the_queue_is_paused(env: Env) -> None:
    r, ln = room(), lane()
    await env.lanes.enqueue(r, ln, b"a")
    await env.lanes.enqueue(r, ln, b"b")
    job = await env.lanes.claim(30_000)
    assert job is not None
    await env.lanes.pause_queue()
    assert await env.lanes.ack_wclaims([job], 30_000, 4) == (1, [], False)
    await env.lanes.resume_queue()
    acked, batches, _ = await env.lanes.ack_wclaims([], 30_000, 4)
    assert acked == 0 and [[j.payload for j in batch] for batch in batches] == [[b"b"]]
    assert await env.lanes.check() == []


@pytest.mark.parametrize("socket_timeout", [1.5, None])
async def test_park_stays_within_the_clients_socket_timeout(
    socket_timeout: float | None, queue_name: str
) -> None:
    """A BLPOP longer than the client's socket timeout would fail as a dead connection; the
    park ends early instead, as a timeout (a client built without one has redis-py's 5 s
    default)."""
    query = "" if socket_timeout is None else f"?socket_timeout={socket_timeout}"
    client = aioredis.Redis.from_url(REDIS_URL + query)
    try:
        lanes = Lanes(client, queue_name)
        started = time.monotonic()
        assert await lanes.park(10.0) is False
        waited = time.monotonic() - started
        assert 3.5 <= waited < 4.9 if socket_timeout is None else 0.2 <= waited < 1.5
    finally:
        await client.aclose()
