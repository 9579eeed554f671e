"""A rolling deploy: workers of an older version and of this one serve one queue at once.

The older version is the last before the job hash's short field names (commit 70076ac): its
scripts are kept as they were built (tests/lanes/older/, each saying so), and `Older` below
calls them with that version's arguments and reads their answers with its decoding. It reads
and writes a job hash under the long names (payload, attempts, state, ...); a job whose hash
it finds rewritten under the short ones it pops and drops (no payload: nothing to serve), an
orphan. So this version's scripts read a job in the layout it is in and write it in that
layout, never rewriting it; only `repair` upgrades the older jobs, the one step
docs/operations.md names for once no older worker serves the queue.

- While the workers roll (the bots still of the older version: every new job of the older
  layout), an older and a newer worker drain one queue, each retrying some jobs, the newer
  one reaping what a dying older worker held and both promoting each other's retries, the
  operators' reads running meanwhile: every job is scored once, none is orphaned, and no job
  hash was rewritten.
- Then the bots too are of this version (new jobs of the short layout beside older ones left
  pending, delayed and held by a dead older worker): the newer worker drains both layouts.
- `repair` upgrades every older job and says so; and it puts back a job an older worker
  dropped, had the bots been upgraded before the workers (the order operations.md gives).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from codemojex.lanes import Job, Lanes, Retry
from codemojex.lanes import keys as K
from codemojex.lanes.consumer import ConsumerPool
from codemojex.limits import RetryPolicy
from codemojex.values import ids
from codemojex.values.redistypes import AnyRedis
from tests.lanes.conftest import Env

OLDER = Path(__file__).parent / "older"
LONG = set(K.JOB_FIELDS)
SHORT = set(K.JOB_FIELDS.values())
QUICK = RetryPolicy("test", base_s=0.01, cap_s=0.05)
SHORT_LEASE_MS = 300  # the dying worker's: reaped soon after it dies
LONG_LEASE_MS = 10_000  # the living workers'


class Older:
    """A worker (and a bot's enqueue) of the older version: its scripts, its facade's
    arguments (KEYS: the queue's prefix and seq key) and its decoding of their answers."""

    def __init__(self, client: AnyRedis, queue: str) -> None:
        keys = K.Keys(queue)
        self._declared = [keys.prefix, keys.seq]
        self._scripts = {
            verb: client.register_script((OLDER / f"{verb}.lua").read_text())
            for verb in ("enqueue", "ack_wclaims", "retry", "reap", "promote")
        }

    async def _call(self, verb: str, *args: Any) -> Any:
        return await self._scripts[verb](keys=self._declared, args=args)

    async def enqueue(self, room: str, lane: str, payload: bytes) -> str:
        job_id = ids.mint(ids.JOB)
        reply = await self._call("enqueue", room, lane, job_id, payload, 5, 0, "", 600_000)
        return str(reply[0].decode())

    async def ack_wclaims(
        self, done: list[Job], lease_ms: int, wanted: int
    ) -> tuple[int, list[list[Job]]]:
        pairs: list[str | int] = []
        for job in done:
            pairs += [job.id, job.attempts]
        reply = await self._call("ack_wclaims", lease_ms, wanted, *pairs)
        batches: list[list[Job]] = []
        at, end = 2, len(reply)
        while at < end:
            fields = reply[at]
            room = reply[at + 1].decode()
            lane = reply[at + 2].decode()
            first = at + 3
            batches.append(
                [
                    Job(reply[i].decode(), room, lane, reply[i + 1], reply[i + 2],
                        reply[i + 3], reply[i + 4], reply[i + 5])
                    for i in range(first, first + fields, 6)
                ]
            )  # fmt: skip
            at = first + fields
        return int(reply[0]), batches

    async def retry(self, job: Job, delay_ms: int, error: str) -> str:
        return str((await self._call("retry", job.id, job.attempts, delay_ms, error)).decode())

    async def maintain(self) -> None:
        await self._call("reap", 1000)
        await self._call("promote", 1000)


async def layouts(env: Env) -> Counter[str]:
    """How many job hashes are of each layout now ("mixed": a hash with names of both)."""
    found: Counter[str] = Counter()
    async for key in env.client.scan_iter(match=env.keys.prefix + "job:*", count=1000):
        names = {k if isinstance(k, str) else k.decode() for k in await env.client.hkeys(key)}
        found["older" if names <= LONG else "current" if names <= SHORT else "mixed"] += 1
    return found


async def older_worker(
    older: Older,
    scored: Counter[str],
    stop: asyncio.Event,
    *,
    fail_every: int,
    die_after: int | None = None,
) -> None:
    """The older worker's loop: one claim round at a time (the finished batch acked in it),
    every `fail_every`-th job's first attempt retried, its maintenance between rounds; after
    `die_after` rounds it dies holding its batch (never acked: its short lease runs out).
    A worker that lives holds a lease no round outlasts, however loaded the host: a lease
    that ran out mid-round would have its batch served again, scored twice by design."""
    lease_ms = SHORT_LEASE_MS if die_after is not None else LONG_LEASE_MS
    done: list[Job] = []
    rounds = 0
    while not stop.is_set():
        _, batches = await older.ack_wclaims(done, lease_ms, 2)
        done = []
        rounds += 1
        if die_after is not None and rounds > die_after and batches:
            return  # killed with its batches in hand
        for batch in batches:
            for job in batch:
                if job.attempts == 1 and int(job.payload) % fail_every == 0:
                    assert await older.retry(job, 0, "older worker failed") == "delayed"
                else:
                    scored[job.id] += 1
                    done.append(job)
        await older.maintain()
        if not batches:
            await asyncio.sleep(0.01)
    await older.ack_wclaims(done, lease_ms, 0)


def newer_handler(scored: Counter[str], fail_every: int) -> Callable[[list[Job]], Awaitable[None]]:
    async def handle(batch: list[Job]) -> None:
        if any(j.attempts == 1 and int(j.payload) % fail_every == 1 for j in batch):
            raise Retry(0, "newer worker failed")
        for job in batch:
            scored[job.id] += 1

    return handle


async def operators_reading(lanes: Lanes, stop: asyncio.Event, rooms: list[str]) -> None:
    """What the ops page, the metrics and the round timer read meanwhile."""
    while not stop.is_set():
        await lanes.stats()
        await lanes.dead()
        await lanes.waiting_before({room: 10**13 for room in rooms})
        await lanes.check(deep=False)
        await asyncio.sleep(0.02)


async def drained(env: Env, scored: Counter[str], total: int, within: float = 30.0) -> None:
    async with asyncio.timeout(within):
        while len(scored) < total or (await env.lanes.stats()).pending:  # noqa: ASYNC110
            await asyncio.sleep(0.02)


@pytest.fixture
def rooms() -> list[tuple[str, list[str]]]:
    return [(ids.mint(ids.ROOM), [ids.mint(ids.PLAYER) for _ in range(4)]) for _ in range(6)]


async def test_an_older_and_a_newer_worker_drain_one_queue_each_job_scored_once(
    env: Env, rooms: list[tuple[str, list[str]]]
) -> None:
    older = Older(env.client, env.queue)
    plan = [(room, lane) for room, lanes in rooms for lane in lanes]
    for room, _ in rooms:
        await env.lanes.limit(room, 3)
    job_ids = [
        await older.enqueue(*plan[n % len(plan)], str(n).encode())  # the older bots' jobs
        for n in range(240)
    ]
    assert await layouts(env) == {"older": 240}

    scored: Counter[str] = Counter()
    stop = asyncio.Event()
    pool = ConsumerPool(
        env.lanes, newer_handler(scored, 5), concurrency=4, lease_ms=LONG_LEASE_MS,
        backoff=QUICK, maintenance_interval_s=0.05, park_timeout_s=0.2,
    )  # fmt: skip
    running = [
        asyncio.create_task(pool.run()),
        asyncio.create_task(older_worker(older, scored, stop, fail_every=5)),
        asyncio.create_task(older_worker(older, scored, stop, fail_every=5, die_after=3)),
        asyncio.create_task(operators_reading(env.lanes, stop, [room for room, _ in rooms])),
    ]
    seen_layouts: Counter[str] = Counter()  # of the job hashes, sampled while both serve
    try:
        with contextlib.suppress(TimeoutError):  # what was not scored is told below
            async with asyncio.timeout(30):
                while len(scored) < len(job_ids) or (await env.lanes.stats()).pending:
                    seen_layouts |= await layouts(env)
                    await asyncio.sleep(0.02)
    finally:
        stop.set()
        pool.stop()
        async with asyncio.timeout(30):
            await asyncio.gather(*running)
    assert not set(job_ids) - set(scored), "never scored (dropped by the older worker)"
    assert set(scored.values()) == {1}, [j for j, n in scored.items() if n > 1]
    assert pool.stats.retried > 0 and pool.stats.acked > 0  # both took part
    assert len(scored) > pool.stats.acked
    assert await env.lanes.check() == []  # none orphaned, nothing left anywhere
    assert await layouts(env) == {}
    assert set(seen_layouts) == {"older"}, seen_layouts  # no job hash was rewritten


async def test_after_the_roll_a_newer_worker_drains_jobs_of_both_layouts(
    env: Env, rooms: list[tuple[str, list[str]]]
) -> None:
    """Older jobs left pending, delayed and held by an older worker that died, beside jobs
    the newer bots admit: the newer worker serves them all, once each."""
    older = Older(env.client, env.queue)
    (room, lanes), *_ = rooms
    old = [await older.enqueue(room, lanes[n % 4], str(n).encode()) for n in range(12)]
    _, held = await older.ack_wclaims([], 50, 2)  # an older worker dies holding these
    delayed = await older.ack_wclaims([], 30_000, 1)
    for job in delayed[1][0]:
        assert await older.retry(job, 0, "older worker failed") == "delayed"
    new = [await env.lanes.enqueue(room, lanes[n % 4], str(n).encode()) for n in range(12, 24)]
    assert await layouts(env) == {"older": 12, "current": 12}
    await asyncio.sleep(0.1)  # the dead worker's leases run out

    scored: Counter[str] = Counter()
    pool = ConsumerPool(
        env.lanes, newer_handler(scored, 7), concurrency=3, lease_ms=2_000,
        backoff=QUICK, maintenance_interval_s=0.05, park_timeout_s=0.2,
    )  # fmt: skip
    task = asyncio.create_task(pool.run())
    try:
        await drained(env, scored, len(old) + len(new))
    finally:
        pool.stop()
        await task
    assert held and set(scored) == set(old + new) and set(scored.values()) == {1}
    assert await env.lanes.check() == []
    assert await layouts(env) == {}


async def test_repair_upgrades_the_older_jobs_and_puts_back_what_an_older_worker_dropped(
    env: Env, rooms: list[tuple[str, list[str]]]
) -> None:
    older = Older(env.client, env.queue)
    (room, lanes), *_ = rooms
    old = [await older.enqueue(room, lanes[0], str(n).encode()) for n in range(3)]
    # Bots upgraded before the last older worker stopped: a job of the short layout, which
    # that worker pops and drops (no `payload` field for it to serve).
    new = await env.lanes.enqueue(room, lanes[1], b"new")
    for _ in range(4):
        _, batches = await older.ack_wclaims([], 30_000, 1)
        for job in [j for batch in batches for j in batch]:
            assert job.id in old
            assert await older.retry(job, 0, "later") == "delayed"
    await older.maintain()
    assert f"job {new}" in " ".join(await env.lanes.check())  # orphaned by the older worker

    fixes = await env.lanes.repair()
    assert f"put job {new} back in lane {lanes[1]} at its seq 4" in fixes
    for job_id in old:
        assert f"upgraded job {job_id} to the short field names" in fixes
    assert await env.lanes.check() == [] and await env.lanes.repair() == []
    assert await layouts(env) == {"current": 4}

    scored: Counter[str] = Counter()
    pool = ConsumerPool(env.lanes, newer_handler(scored, 1_000), concurrency=2, lease_ms=2_000)
    task = asyncio.create_task(pool.run())
    try:
        await drained(env, scored, 4)
    finally:
        pool.stop()
        await task
    assert set(scored) == {*old, new} and set(scored.values()) == {1}
