"""What operators read and do (stats, rooms, the ranked books, dead jobs, requeue), on the
real Redis, fakeredis and a Redis Cluster (`env`). The books they read are kept by the hot
verbs; test_model.py compares them with its model after every step."""

from __future__ import annotations

import pytest

from codemojex.lanes import LaneError, Lanes
from codemojex.values import ids
from tests.lanes.conftest import Env


def room() -> str:
    return ids.mint(ids.ROOM)


def lane() -> str:
    return ids.mint(ids.PLAYER)


async def test_stats_count_jobs_and_rooms_by_state(env: Env) -> None:
    empty = await env.lanes.stats(top=5)
    assert (empty.pending, empty.active, empty.waiting, empty.oldest_ms) == (0, 0, 0, None)
    assert empty.oldest_age_s == 0.0 and empty.deepest == ()
    deep, held, shallow, idle = room(), room(), room(), room()
    for _ in range(3):
        await env.lanes.enqueue(deep, lane(), b"d")
    first = await env.lanes.enqueue(held, lane(), b"h")
    await env.lanes.enqueue(held, lane(), b"h")
    await env.lanes.enqueue(shallow, lane(), b"s")
    await env.lanes.limit(held, 1)
    await env.lanes.pause(idle)
    await env.lanes.pause(shallow)
    await env.lanes.pause(lane())  # a paused lane is no paused room
    # claim until `held` has its one permit in flight
    while (job := await env.lanes.claim(30_000)) is not None and job.room != held:
        pass
    s = await env.lanes.stats(top=2)
    assert s.active >= 1 and s.pending == 6 - s.active
    assert s.waiting == 3 and s.paused == 2 and s.at_ceiling == 1
    # `deep` can be served; `held` is at its ceiling, `shallow` paused: off the ring
    assert s.serviceable == 1
    assert s.deepest[0][0] == deep and len(s.deepest) == 2
    assert s.oldest_ms is not None and s.now_ms >= s.oldest_ms
    job_hash = await env.client.hget(env.keys.job(first), "e")
    assert job_hash is not None and s.oldest_ms <= int(job_hash)
    await env.lanes.pause_queue()
    assert (await env.lanes.stats()).queue_paused


async def test_the_oldest_pending_job_is_the_lowest_head(env: Env) -> None:
    r1, r2, a, b = room(), room(), lane(), lane()
    old = await env.lanes.enqueue(r1, a, b"1")
    await env.client.hset(env.keys.job(old), "e", 1000)  # apart from the next
    second = await env.lanes.enqueue(r2, b, b"2")
    await env.lanes.enqueue(r1, a, b"3")
    t_second = int(await env.client.hget(env.keys.job(second), "e") or 0)
    assert (await env.lanes.stats()).oldest_ms == 1000
    job = await env.lanes.claim(30_000)  # the room ring serves r1's head first
    assert job is not None and job.id == old
    assert (await env.lanes.stats()).oldest_ms == t_second  # lane b's head, not a's next
    t_old = 1000
    await env.expire(job.id)
    assert await env.lanes.reap() == 1  # back at its seq: the oldest again
    assert (await env.lanes.stats()).oldest_ms == t_old
    assert await env.lanes.check() == []


async def test_rooms_report_their_queue_side(env: Env) -> None:
    r, quiet, ln, ln2 = room(), room(), lane(), lane()
    first = await env.lanes.enqueue(r, ln, b"a")
    await env.lanes.enqueue(r, ln2, b"b")
    await env.lanes.limit(r, 3)
    await env.lanes.pause(ln)  # its job is held, and still the room's oldest
    await env.lanes.pause(quiet)
    busy, calm = await env.lanes.rooms([r, quiet])
    enqueued = int(await env.client.hget(env.keys.job(first), "e") or 0)
    assert (busy.room, busy.pending, busy.in_flight, busy.ceiling) == (r, 2, 0, 3)
    assert busy.oldest_ms == enqueued and not busy.paused
    assert busy.last_enqueue_ms is not None and busy.last_enqueue_ms >= enqueued
    assert (calm.pending, calm.ceiling, calm.paused, calm.oldest_ms) == (0, None, True, None)
    assert calm.last_enqueue_ms is None
    assert await env.lanes.rooms([]) == []
    with pytest.raises(LaneError):
        await env.lanes.rooms(["not a room"])


async def test_rooms_by_depth_and_activity_are_pages_of_the_books(env: Env) -> None:
    rooms = [room() for _ in range(5)]
    for depth, r in enumerate(rooms, start=1):
        for _ in range(depth):
            await env.lanes.enqueue(r, lane(), b"x")
    total, page = await env.lanes.rooms_by("depth", 1, 2)
    assert total == 5 and page == [(rooms[3], 4), (rooms[2], 3)]
    _, shallow = await env.lanes.rooms_by("depth", 0, 2, descending=False)
    assert shallow == [(rooms[0], 1), (rooms[1], 2)]
    total, latest = await env.lanes.rooms_by("activity", 0, 1)
    assert total == 5 and latest[0][0] == rooms[4]
    with pytest.raises(KeyError):
        await env.lanes.rooms_by("title", 0, 1)


async def test_dead_jobs_are_listed_and_requeued_with_attempts_given_again(env: Env) -> None:
    r, ln = room(), lane()
    jid = await env.lanes.enqueue(r, ln, b"p", max_attempts=1)
    job = await env.lanes.claim(30_000)
    assert job is not None
    assert await env.lanes.retry(job, 0, "boom: the handler failed") == "dead"
    total, page = await env.lanes.dead()
    assert total == 1 and len(page) == 1
    dead = page[0]
    assert (dead.id, dead.room, dead.lane, dead.attempts, dead.max_attempts) == (jid, r, ln, 1, 1)
    assert dead.last_error == "boom: the handler failed" and dead.died_ms >= dead.enqueued_ms
    # the lane is forgotten meanwhile (dead jobs do not keep it): requeue binds it again
    forgetful = Lanes(env.client, env.queue, lane_idle_ms=1)
    # both last-seen times set long ago: on a fast host the whole test fits in the 1 ms idle time
    await env.client.zadd(env.keys.lseen, {ln: 1}, xx=True)
    await env.client.zadd(env.keys.rseen, {r: 1}, xx=True)
    assert await forgetful.retain() == (0, 1)
    assert "rseen" not in await env.dump()  # the room's last enqueue goes with the idle time
    assert await env.lanes.requeue(jid) is True
    assert await env.lanes.requeue(jid) is False  # not dead any more
    assert await env.lanes.check() == []
    again = await env.lanes.claim(30_000)
    assert again is not None and again.id == jid
    # the fencing token counts on; the allowance is given again
    assert (again.attempts, again.max_attempts) == (2, 2)
    assert await env.lanes.ack(again) is True
    assert (await env.lanes.dead())[0] == 0
    assert await env.lanes.requeue(ids.mint(ids.JOB)) is False


async def test_requeue_refuses_a_lane_bound_to_another_room(env: Env) -> None:
    r, ln = room(), lane()
    jid = await env.lanes.enqueue(r, ln, b"p", max_attempts=1)
    await env.lanes.purge(ln)
    await env.client.hset(env.keys.lroom, ln, room())  # damage: the lane moved rooms
    before = await env.dump()
    with pytest.raises(LaneError, match="cannot requeue"):
        await env.lanes.requeue(jid)
    assert await env.dump() == before


async def test_repair_rebuilds_the_books(env: Env) -> None:
    r, ln = room(), lane()
    await env.lanes.enqueue(r, ln, b"a")
    await env.lanes.enqueue(r, ln, b"b")
    await env.client.delete(env.keys.rdepth, env.keys.lhead)
    await env.client.set(env.keys.npending, 7)
    problems = await env.lanes.check()
    assert problems == sorted(
        [
            f"lhead of lane {ln} is nil but should be 1",
            "npending is 7 but 2 jobs are pending",
            f"rdepth of room {r} is nil but should be 2",
        ]
    )
    fixes = await env.lanes.repair()
    assert set(fixes) == {f"lhead of lane {ln}: nil -> 1", f"rdepth of room {r}: nil -> 2",
                          "npending: 7 -> 2"}  # fmt: skip
    assert await env.lanes.check() == []


async def test_waiting_before_finds_a_rooms_old_jobs_pending_in_flight_or_delayed(
    env: Env,
) -> None:
    """The round timer's question: does a room still hold a job enqueued before a moment?"""
    r, other, empty, ln, ln2 = room(), room(), room(), lane(), lane()
    first = await env.lanes.enqueue(r, ln, b"old")
    at = int(await env.client.hget(env.keys.job(first), "e") or 0)
    await env.lanes.enqueue(other, ln2, b"x")
    now, rooms = await env.lanes.waiting_before({r: at + 1, empty: at + 1})
    assert rooms == {r} and now >= at
    assert (await env.lanes.waiting_before({r: at}))[1] == set()  # enqueued at, not before
    await env.lanes.pause(r)  # a paused room's backlog still counts
    assert (await env.lanes.waiting_before({r: at + 1}))[1] == {r}
    await env.lanes.resume(r)
    await env.lanes.pause(ln)  # so does a paused lane's (held off the ring)
    assert (await env.lanes.waiting_before({r: at + 1}))[1] == {r}
    await env.lanes.resume(ln)
    job = await env.lanes.claim(30_000)
    while job is not None and job.room != r:  # the other room may come first
        await env.lanes.ack(job)
        job = await env.lanes.claim(30_000)
    assert job is not None and job.id == first
    assert (await env.lanes.waiting_before({r: at + 1}))[1] == {r}  # in flight
    assert await env.lanes.retry(job, 60_000, "database unavailable") == "delayed"
    assert (await env.lanes.waiting_before({r: at + 1}))[1] == {r}  # waiting for a retry
    await env.make_due(first)
    assert await env.lanes.promote() == 1
    job = await env.lanes.claim(30_000)
    while job is not None and job.id != first:
        await env.lanes.ack(job)
        job = await env.lanes.claim(30_000)
    assert job is not None
    await env.lanes.ack(job)
    assert (await env.lanes.waiting_before({r: at + 1, other: 2**40}))[1] == set()
    with pytest.raises(LaneError):
        await env.lanes.waiting_before({"not a room": 1})
    assert await env.lanes.check() == []
