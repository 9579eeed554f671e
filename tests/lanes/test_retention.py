"""Retention: dead jobs are capped by count and age, idle lanes are forgotten, and a room's
snapshot costs what its lanes with work cost, however many players the room has had.

Runs on the real Redis, on fakeredis and on a Redis Cluster (`env`). Time passes by rewriting
scores (a dead job's time of death, a lane's last enqueue), never by sleeping.
"""

from __future__ import annotations

from typing import Any
from unittest.mock import ANY

from redis.asyncio.cluster import RedisCluster

from codemojex.lanes import ConsumerPool, Job, Lanes
from codemojex.lanes.facade import RECHECK_MS, RETENTION_MS_MAX
from tests.helpers.waiting import until
from tests.lanes.conftest import Env
from tests.lanes.test_consumer import run_pool
from tests.lanes.test_verbs import lane, room

HOUR_MS = 3_600_000
FOREVER_MS = RETENTION_MS_MAX


async def server_ms(env: Env) -> int:
    seconds, micros = await env.client.time()
    return int(seconds) * 1000 + int(micros) // 1000


async def dead_jobs(env: Env, n: int) -> list[str]:
    """`n` dead jobs of one lane (purged), oldest first."""
    r, ln = room(), lane()
    jids = [await env.lanes.enqueue(r, ln, f"p{i}".encode()) for i in range(n)]
    assert await env.lanes.purge(ln) == n
    return jids


async def died_at(env: Env, scores: dict[str, int]) -> None:
    await env.client.zadd(env.keys.dead, scores, xx=True)


async def last_enqueued_at(env: Env, scores: dict[str, int]) -> None:
    await env.client.zadd(env.keys.lseen, scores, xx=True)


def job_keys(d: dict[str, Any]) -> set[str]:
    return {k.removeprefix("job:") for k in d if k.startswith("job:")}


# -- dead jobs -----------------------------------------------------------------------------


async def test_dead_jobs_beyond_the_cap_go_oldest_first_with_their_hashes(env: Env) -> None:
    jids = await dead_jobs(env, 5)
    now = await server_ms(env)
    await died_at(env, {jid: now - 5 + n for n, jid in enumerate(jids)})
    capped = Lanes(env.client, env.queue, dead_max=2)
    assert await capped.retain() == (3, 0)
    d = await env.dump()
    assert [jid for jid, _ in d["dead"]] == jids[3:]
    assert job_keys(d) == set(jids[3:])
    assert await capped.retain() == (0, 0)
    assert await env.lanes.check() == []
    assert await Lanes(env.client, env.queue, dead_max=0).retain() == (2, 0)
    d = await env.dump()
    assert "dead" not in d and not job_keys(d)
    assert await env.lanes.check() == []


async def test_dead_jobs_older_than_the_age_go(env: Env) -> None:
    jids = await dead_jobs(env, 3)
    now = await server_ms(env)
    await died_at(env, {jids[0]: now - 2 * HOUR_MS, jids[1]: now - HOUR_MS - 1000, jids[2]: now})
    aged = Lanes(env.client, env.queue, dead_age_ms=HOUR_MS)
    assert await aged.retain() == (2, 0)
    d = await env.dump()
    assert d["dead"] == [(jids[2], now)] and job_keys(d) == {jids[2]}
    assert await env.lanes.check() == []
    # the defaults: 10,000 dead jobs, 7 days
    assert (env.lanes.dead_max, env.lanes.dead_age_ms) == (10_000, 7 * 24 * HOUR_MS)
    await died_at(env, {jids[2]: now - 7 * 24 * HOUR_MS - 1000})
    assert await env.lanes.retain() == (1, 0)


async def test_retention_works_in_bounded_batches(env: Env) -> None:
    """A pass does at most `batch` dead jobs and examines at most `batch` lanes."""
    jids = await dead_jobs(env, 5)
    idle = [lane() for _ in range(3)]
    r = room()
    for ln in idle:
        job = await env.lanes.enqueue(r, ln, b"x")
        claimed = await env.lanes.claim(30_000)
        assert claimed is not None and claimed.id == job
        assert await env.lanes.ack(claimed)
    await last_enqueued_at(env, {ln: n for n, ln in enumerate(idle, 1)})
    small = Lanes(env.client, env.queue, batch=2, dead_max=0, lane_idle_ms=HOUR_MS)
    assert await small.retain() == (2, 2)
    assert await small.retain() == (2, 1)
    assert await small.retain() == (1, 0)
    assert await small.retain() == (0, 0)
    d = await env.dump()
    assert not job_keys(d) & set(jids) and "dead" not in d
    assert not set(d["lroom"]) & set(idle) and not {m for m, _ in d["lseen"]} & set(idle)
    assert await env.lanes.check() == []


# -- forgotten lanes -----------------------------------------------------------------------


async def test_an_idle_empty_lane_is_forgotten_and_comes_back_as_a_new_lane(env: Env) -> None:
    r, quiet, busy = room(), lane(), lane()
    await env.lanes.enqueue(r, quiet, b"q")
    job = await env.lanes.claim(30_000)
    assert job is not None and await env.lanes.ack(job)
    waiting = await env.lanes.enqueue(r, busy, b"b")
    lanes = Lanes(env.client, env.queue, lane_idle_ms=HOUR_MS)
    assert await lanes.retain() == (0, 0)  # both enqueued just now
    await last_enqueued_at(env, {quiet: 1, busy: 2})
    before = await server_ms(env)
    assert await lanes.retain() == (0, 1)
    after = await server_ms(env)
    d = await env.dump()
    assert d["lroom"] == {busy: r} and d[f"r:{r}:lanes"] == {busy}
    (member, seen), *rest = d["lseen"]
    assert member == busy and not rest and before <= seen <= after  # seen with work: now
    assert d[f"g:{busy}:pending"] == [(waiting, 2)]
    assert await env.lanes.check() == []
    # its next job binds it again, as a new lane
    again = await env.lanes.enqueue(r, quiet, b"q2")
    d = await env.dump()
    assert d["lroom"] == {busy: r, quiet: r} and d[f"r:{r}:lanes"] == {busy, quiet}
    assert {m for m, _ in d["lseen"]} == {busy, quiet}
    assert d[f"g:{quiet}:pending"] == [(again, 3)] and d[f"r:{r}:ring"] == [busy, quiet]
    assert await env.lanes.check() == []


async def test_a_lane_is_not_forgotten_while_a_job_of_its_room_is_in_flight(env: Env) -> None:
    """In flight is counted per room, so a lane waits for its room to have none."""
    r, ln, other = room(), lane(), lane()
    await env.lanes.enqueue(r, ln, b"x")
    mine = await env.lanes.claim(30_000)
    assert mine is not None
    lanes = Lanes(env.client, env.queue, lane_idle_ms=HOUR_MS)
    await last_enqueued_at(env, {ln: 1})
    before = await server_ms(env)
    assert await lanes.retain() == (0, 0)
    after = await server_ms(env)
    (_, seen), *_ = (await env.dump())["lseen"]
    # looked at again after RECHECK_MS, not after a whole idle time
    recheck = RECHECK_MS - HOUR_MS
    assert before + recheck <= seen <= after + recheck
    assert await env.lanes.ack(mine)
    await env.lanes.enqueue(r, other, b"y")
    theirs = await env.lanes.claim(30_000)
    assert theirs is not None and theirs.lane == other
    await last_enqueued_at(env, {ln: 1})
    assert await lanes.retain() == (0, 0)  # another lane's job holds the room
    assert await env.lanes.ack(theirs)
    assert await lanes.retain() == (0, 0)  # not due again yet
    await last_enqueued_at(env, {ln: 1})
    assert await lanes.retain() == (0, 1)
    d = await env.dump()
    assert d["lroom"] == {other: r} and [m for m, _ in d["lseen"]] == [other]
    assert await env.lanes.check() == []


async def test_a_lane_with_a_delayed_job_is_not_forgotten(env: Env) -> None:
    r, ln = room(), lane()
    jid = await env.lanes.enqueue(r, ln, b"x")
    job = await env.lanes.claim(30_000)
    assert job is not None
    assert await env.lanes.retry(job, 600_000, "later") == "delayed"
    assert (await env.dump())["ldelayed"] == {ln: "1"}
    lanes = Lanes(env.client, env.queue, lane_idle_ms=HOUR_MS)
    await last_enqueued_at(env, {ln: 1})
    assert await lanes.retain() == (0, 0)
    d = await env.dump()
    assert d["lroom"] == {ln: r} and d["lseen"] == [(ln, ANY)] and d["lseen"][0][1] > 1
    assert await env.lanes.check() == []
    await env.make_due(jid)
    assert await env.lanes.promote() == 1
    assert "ldelayed" not in await env.dump()
    again = await env.lanes.claim(30_000)
    assert again is not None and await env.lanes.ack(again)
    await last_enqueued_at(env, {ln: 1})
    assert await lanes.retain() == (0, 1)
    assert await env.lanes.check() == []


async def test_an_admins_weight_and_pause_outlive_a_forgotten_lane(env: Env) -> None:
    """The lanes forget the binding, not the admin's intent: the lane comes back weighted
    and paused (kept off its ring, in its room's held set)."""
    r, ln = room(), lane()
    await env.lanes.enqueue(r, ln, b"x")
    job = await env.lanes.claim(30_000)
    assert job is not None and await env.lanes.ack(job)
    await env.lanes.weight(ln, 3)
    await env.lanes.pause(ln)
    await last_enqueued_at(env, {ln: 1})
    assert await Lanes(env.client, env.queue, lane_idle_ms=HOUR_MS).retain() == (0, 1)
    d = await env.dump()
    assert "lroom" not in d and d["gweight"] == {ln: "3"} and d["paused"] == {ln}
    back = await env.lanes.enqueue(r, ln, b"y")
    d = await env.dump()
    assert d["lroom"] == {ln: r} and d[f"r:{r}:held"] == {ln} and "ring" not in d
    view = (await env.lanes.snapshot(r))["rooms"][r]
    assert view["lanes"] == {ln: {"depth": 1, "weight": 3, "paused": True}}
    await env.lanes.resume(ln)
    d = await env.dump()
    assert f"r:{r}:held" not in d and d[f"r:{r}:ring"] == [ln] and d["ring"] == [r]
    batch = await env.lanes.wclaim(30_000)
    assert [j.id for j in batch] == [back]
    assert await env.lanes.check() == []


async def test_held_set_follows_the_paused_lanes_with_work(env: Env) -> None:
    r, a, b = room(), lane(), lane()
    await env.lanes.pause(a)
    ja = await env.lanes.enqueue(r, a, b"a")  # paused on arrival: held, not ringed
    assert (await env.dump())[f"r:{r}:held"] == {a}
    await env.lanes.enqueue(r, b, b"b")
    await env.lanes.pause(b)  # paused with work: leaves the ring for the held set
    d = await env.dump()
    assert d[f"r:{r}:held"] == {a, b} and "ring" not in d and f"r:{r}:ring" not in d
    assert await env.lanes.reassign(ja, b) is True  # a empties: out of the held set
    assert (await env.dump())[f"r:{r}:held"] == {b}
    assert await env.lanes.purge(b) == 2  # b empties too
    assert f"r:{r}:held" not in await env.dump()
    assert await env.lanes.check() == []


# -- /queue --------------------------------------------------------------------------------


async def commands_run(env: Env) -> int | None:
    """Commands the queue's Redis node has run so far (INFO commandstats, without the INFO
    and script calls themselves), or None where there is no INFO (fakeredis)."""
    client: Any = env.client
    try:
        if isinstance(client, RedisCluster):
            node = client.get_node_from_key(env.keys.seq)
            stats = await client.info("commandstats", target_nodes=node)
        else:
            stats = await client.info("commandstats")
    except Exception as exc:  # fakeredis: "unknown command 'info'"
        assert "info" in str(exc).lower()
        return None
    skip = {"cmdstat_info", "cmdstat_evalsha", "cmdstat_eval", "cmdstat_script|load"}
    return sum(int(v["calls"]) for k, v in stats.items() if k not in skip)


async def test_a_rooms_snapshot_costs_its_lanes_with_work_not_every_lane_it_had(
    env: Env,
) -> None:
    """10,000 players who guessed once and went quiet, 3 with guesses waiting (one of them
    paused): /queue reads the 3."""
    r = room()
    busy = sorted(lane() for _ in range(3))
    for n, ln in enumerate(busy):
        for i in range(n + 1):
            await env.lanes.enqueue(r, ln, f"{ln}-{i}".encode())
    await env.lanes.pause(busy[2])
    # the quiet players' lanes, as enqueue + claim + ack leave them (bound, empty), written
    # in bulk; check() below proves the keyspace is a sound one
    quiet = [lane() for _ in range(10_000)]
    for start in range(0, len(quiet), 1_000):
        chunk = quiet[start : start + 1_000]
        await env.client.hset(env.keys.lroom, mapping=dict.fromkeys(chunk, r))
        await env.client.sadd(env.keys.room_lanes(r), *chunk)
        await env.client.zadd(env.keys.lseen, dict.fromkeys(chunk, 1))
    assert await env.lanes.check(deep=False) == []

    costs = []
    for _ in range(5):  # the least of a few: other clients share the real Redis
        before = await commands_run(env)
        view = (await env.lanes.snapshot(r))["rooms"][r]
        after = await commands_run(env)
        if before is not None and after is not None:
            costs.append(after - before)
    if costs:  # about 20 commands; reading every lane the room had would be 30,000+
        assert min(costs) < 200, costs
    assert view["lanes"] == {
        busy[0]: {"depth": 1, "weight": 1, "paused": False},
        busy[1]: {"depth": 2, "weight": 1, "paused": False},
        busy[2]: {"depth": 3, "weight": 1, "paused": True},
    }
    assert view["pending"] == 6 and view["ring"] == busy[:2]
    # and the quiet lanes are forgotten by retention, a batch at a time
    retain = Lanes(env.client, env.queue, lane_idle_ms=HOUR_MS)
    assert await retain.retain() == (0, 1_000)
    assert await env.client.hlen(env.keys.lroom) == 3 + 9_000


# -- the consumers run it --------------------------------------------------------------------


async def test_the_pools_maintenance_runs_retention(env: Env) -> None:
    jids = await dead_jobs(env, 3)
    r, ln = room(), lane()
    await env.lanes.enqueue(r, ln, b"x")
    lanes = Lanes(env.client, env.queue, dead_max=1, lane_idle_ms=HOUR_MS)
    done: list[Job] = []

    async def handler(jobs: list[Job]) -> None:
        done.extend(jobs)

    pool = ConsumerPool(lanes, handler, concurrency=1, maintenance_interval_s=0.05)
    task = await run_pool(pool)
    await until(lambda: pool.stats.acked == 1 and pool.stats.trimmed == 2)
    await last_enqueued_at(env, {ln: 1})
    await until(lambda: pool.stats.forgotten == 1)
    pool.stop()
    await task
    d = await env.dump()
    assert len(d["dead"]) == 1 and job_keys(d) == {d["dead"][0][0]} <= set(jids)
    assert [job.lane for job in done] == [ln]
    assert ln not in d["lroom"] and ln not in {m for m, _ in d["lseen"]}
    assert await env.lanes.check() == []
