"""The consumer pool on the real Redis and on fakeredis."""

from __future__ import annotations

import asyncio
import inspect
import os
import random
import signal
from collections.abc import Awaitable, Callable

import pytest

from codemojex.lanes import ConsumerPool, Job, Lanes, Retry
from codemojex.limits import RETRIES, RetryPolicy
from codemojex.outages import pause_s
from codemojex.values import ids
from tests.helpers.waiting import until
from tests.lanes.conftest import Env


async def run_pool(pool: ConsumerPool) -> asyncio.Task[None]:
    task = asyncio.create_task(pool.run())
    await asyncio.sleep(0)
    return task


def recorder(seen: list[list[Job]]) -> Callable[[list[Job]], Awaitable[None]]:
    async def handler(jobs: list[Job]) -> None:
        seen.append(jobs)

    return handler


async def test_batches_are_one_lane_in_mint_order_and_acked(env: Env) -> None:
    rooms = [ids.mint(ids.ROOM) for _ in range(2)]
    lanes = [ids.mint(ids.PLAYER) for _ in range(3)]
    for ln in lanes:
        await env.lanes.weight(ln, 4)
    expected: dict[str, list[str]] = {ln: [] for ln in lanes}
    for i in range(30):
        ln = lanes[i % 3]
        r = rooms[0] if ln != lanes[2] else rooms[1]
        expected[ln].append(await env.lanes.enqueue(r, ln, f"p{i}".encode()))
    seen: list[list[Job]] = []
    pool = ConsumerPool(env.lanes, recorder(seen), concurrency=3, lease_ms=30_000)
    task = await run_pool(pool)
    await until(lambda: pool.stats.acked == 30)
    pool.stop()
    await task
    for batch in seen:
        assert 1 <= len(batch) <= 4 and len({job.lane for job in batch}) == 1
    served: dict[str, list[str]] = {ln: [] for ln in lanes}
    for batch in sorted(seen, key=lambda b: b[0].seq):
        served[batch[0].lane].extend(job.id for job in batch)
    assert served == expected
    assert pool.stats.claimed == 30 and pool.stats.stale == 0
    d = await env.dump()
    assert not {"active", "ring", "gactive", "delayed", "dead"} & d.keys()
    assert not [k for k in d if k.startswith(("job:", "g:"))]
    assert await env.lanes.check() == []


async def test_typed_retry_waits_the_given_delay(env: Env) -> None:
    r, ln = ids.mint(ids.ROOM), ids.mint(ids.PLAYER)
    jid = await env.lanes.enqueue(r, ln, b"x")
    calls: list[int] = []

    async def handler(jobs: list[Job]) -> None:
        calls.append(jobs[0].attempts)
        if len(calls) == 1:
            raise Retry(60_000, "rate limited")

    pool = ConsumerPool(env.lanes, handler, concurrency=1, maintenance_interval_s=0.05)
    task = await run_pool(pool)
    await until(lambda: pool.stats.retried == 1)
    d = await env.dump()
    assert d[f"job:{jid}"]["t"] == "delayed"
    assert d[f"job:{jid}"]["x"] == "rate limited"
    (_, due), *_ = d["delayed"]
    (seconds, micros) = await env.client.time()
    assert due >= seconds * 1000 + micros // 1000 + 55_000  # the handler's delay, not a backoff
    await env.make_due(jid)
    await until(lambda: pool.stats.acked == 1)
    pool.stop()
    await task
    assert calls == [1, 2]
    assert await env.lanes.check() == []


async def test_a_short_retry_is_served_when_due_not_at_the_next_maintenance_tick(
    real_env: Env,
) -> None:
    """Retries shorter than the maintenance interval (5 s here) are promoted when they come
    due, and the promote's wake reaches the parked consumer (its park timeout, 4 s, is kept
    under redis-py's 5 s socket timeout). The shorter retry is scheduled after the longer
    one, and neither deadline is lost."""
    slow, quick = [
        await real_env.lanes.enqueue(ids.mint(ids.ROOM), ids.mint(ids.PLAYER), b"x")
        for _ in range(2)
    ]
    delay_s = {slow: 0.6, quick: 0.2}
    served: dict[str, list[float]] = {slow: [], quick: []}
    loop = asyncio.get_running_loop()

    async def handler(jobs: list[Job]) -> None:
        served[jobs[0].id].append(loop.time())
        if jobs[0].attempts == 1:
            raise Retry(int(delay_s[jobs[0].id] * 1000))

    pool = ConsumerPool(
        real_env.lanes, handler, concurrency=1, maintenance_interval_s=5, park_timeout_s=4
    )
    task = await run_pool(pool)
    await until(lambda: pool.stats.acked == 2, 15)
    pool.stop()
    async with asyncio.timeout(5):
        await task
    assert served[slow][0] < served[quick][0]  # the longer retry was scheduled first
    for jid, delay in delay_s.items():
        first, second = served[jid]
        # generous for a loaded machine; the next maintenance tick would be ~5 s
        assert delay * 0.9 <= second - first <= delay + 1.5, (jid, delay, second - first)
    assert pool.stats.retried == 2 and pool.stats.reaped == 0
    assert await real_env.lanes.check() == []


async def test_exception_is_retried_with_backoff_then_dead(env: Env) -> None:
    r, ln = ids.mint(ids.ROOM), ids.mint(ids.PLAYER)
    jid = await env.lanes.enqueue(r, ln, b"secret-payload", max_attempts=3)
    attempts: list[int] = []

    async def handler(jobs: list[Job]) -> None:
        attempts.append(jobs[0].attempts)
        raise ValueError("scoring failed")

    pool = ConsumerPool(
        env.lanes,
        handler,
        concurrency=2,
        backoff=RetryPolicy("test", base_s=0.02, cap_s=0.04, jitter=True),
        maintenance_interval_s=0.02,
        rng=random.Random(7),
    )
    task = await run_pool(pool)
    await until(lambda: pool.stats.dead == 1)
    pool.stop()
    await task
    assert attempts == [1, 2, 3]
    assert (pool.stats.retried, pool.stats.dead, pool.stats.acked) == (2, 1, 0)
    d = await env.dump()
    assert d[f"job:{jid}"]["t"] == "dead"
    assert d[f"job:{jid}"]["x"] == "ValueError: scoring failed"
    assert [m for m, _ in d["dead"]] == [jid]
    assert await env.lanes.check() == []


def test_backoff_is_exponential_with_full_jitter() -> None:
    """The pool's handler retries wait `outages.pause_s` under its policy (`RETRIES.job` by
    default): exponential, full jitter, no floor."""
    rng = random.Random(1)
    policy = RetryPolicy("test", base_s=0.1, cap_s=1.0, jitter=True)
    for attempts, ceiling in [(1, 0.1), (2, 0.2), (3, 0.4), (4, 0.8), (5, 1.0), (30, 1.0)]:
        draws = [pause_s(policy, attempts, rng) for _ in range(200)]
        assert min(draws) >= 0 and max(draws) <= ceiling
        assert max(draws) > ceiling * 0.8 and min(draws) < ceiling * 0.2  # spread, not fixed
    assert inspect.signature(ConsumerPool).parameters["backoff"].default is RETRIES.job
    assert RETRIES.job.jitter and RETRIES.job.floor_s == 0


async def test_parks_when_empty_and_wakes_on_enqueue(env: Env) -> None:
    """Parked consumers cost nothing each: the pool has one waiter on the wake list, and the
    consumers it sends back to claim ask together, in one script call."""
    seen: list[list[Job]] = []
    pool = ConsumerPool(
        env.lanes, recorder(seen), concurrency=3, park_timeout_s=30, maintenance_interval_s=30
    )
    task = await run_pool(pool)
    await until(lambda: pool.stats.parks == 3 and pool.stats.waits == 1)
    await asyncio.sleep(0.3)
    # one empty round for the three, then parked under one BLPOP: no polling
    assert (pool.stats.claims, pool.stats.waits) == (1, 1)
    r, ln = ids.mint(ids.ROOM), ids.mint(ids.PLAYER)
    jid = await env.lanes.enqueue(r, ln, b"x")
    await until(lambda: pool.stats.acked == 1, 5)  # far below the 30 s park timeout
    assert seen[0][0].id == jid
    await asyncio.sleep(0.2)
    # the token woke the waiter, the three claimed in one round; the one served asked again
    # with its ack, found nothing and parked; the waiter blocks again
    assert (pool.stats.claims, pool.stats.waits) == (3, 2)
    pool.stop()
    async with asyncio.timeout(5):
        await task  # stop() wakes parked consumers, no need to wait for the timeout


async def test_a_round_serves_every_consumer_asking_in_one_call(env: Env) -> None:
    """Eight consumers with work for all: the batches of a round are claimed by one script
    call, and the acks of finished batches ride on the next round's call."""
    lanes = CountingLanes(env.client, env.queue)
    lanes.calls = {}
    r = ids.mint(ids.ROOM)
    players = [ids.mint(ids.PLAYER) for _ in range(8)]
    for i in range(64):
        await lanes.enqueue(r, players[i % 8], f"p{i}".encode())
    seen: list[list[Job]] = []

    async def handler(jobs: list[Job]) -> None:
        await asyncio.sleep(0.01)
        seen.append(jobs)

    pool = ConsumerPool(lanes, handler, concurrency=8, park_timeout_s=30)
    task = await run_pool(pool)
    await until(lambda: pool.stats.acked == 64)
    pool.stop()
    await task
    assert sum(len(batch) for batch in seen) == 64
    assert pool.stats.claims == lanes.calls["ack_wclaims"]
    # One call per consumer would be one per batch (64 batches of one job here); rounds make
    # about 10 on a quiet machine, and on a busy one consumers drift apart and a round serves
    # fewer of them, so the bound is that calls are shared, not how well.
    assert lanes.calls["ack_wclaims"] <= len(seen) // 2
    assert "ack_wclaim" not in lanes.calls and "wclaim" not in lanes.calls
    assert await env.lanes.check() == []


async def test_stop_finishes_and_acks_the_batches_in_hand(env: Env) -> None:
    r, ln = ids.mint(ids.ROOM), ids.mint(ids.PLAYER)
    await env.lanes.weight(ln, 3)
    for i in range(5):
        await env.lanes.enqueue(r, ln, f"p{i}".encode())
    started = asyncio.Event()
    release = asyncio.Event()
    handled: list[str] = []

    async def handler(jobs: list[Job]) -> None:
        started.set()
        await release.wait()
        handled.extend(job.id for job in jobs)

    pool = ConsumerPool(env.lanes, handler, concurrency=1)
    task = await run_pool(pool)
    await started.wait()
    pool.stop()
    await asyncio.sleep(0.05)
    assert not task.done()  # still finishing the batch in hand
    release.set()
    await task
    assert len(handled) == 3 and pool.stats.acked == 3
    d = await env.dump()
    assert "active" not in d and "gactive" not in d
    assert len(d[f"g:{ln}:pending"]) == 2  # not claimed after stop
    assert await env.lanes.check() == []


class CountingLanes(Lanes):
    """The real facade, counting the scripts it runs per verb."""

    calls: dict[str, int]

    async def _call(self, verb: str, *args: object) -> object:
        self.calls[verb] = self.calls.get(verb, 0) + 1
        return await super()._call(verb, *args)


async def test_a_round_takes_at_most_its_cap_the_rest_go_in_the_next(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("codemojex.lanes.consumer.CLAIM_ROUND_MAX", 2)
    lanes = CountingLanes(env.client, env.queue)
    lanes.calls = {}
    r = ids.mint(ids.ROOM)
    for i in range(10):
        await lanes.enqueue(r, ids.mint(ids.PLAYER), f"p{i}".encode())
    seen: list[list[Job]] = []
    pool = ConsumerPool(lanes, recorder(seen), concurrency=5, park_timeout_s=30)
    task = await run_pool(pool)
    await until(lambda: pool.stats.acked == 10)
    pool.stop()
    await task
    assert sorted(job.payload for batch in seen for job in batch) == sorted(
        f"p{i}".encode() for i in range(10)
    )
    assert lanes.calls["ack_wclaims"] >= 10 // 2  # two requests a round at most
    assert await env.lanes.check() == []


async def test_a_batch_costs_one_script_call_its_ack_rides_on_the_next_claim(env: Env) -> None:
    lanes = CountingLanes(env.client, env.queue)
    lanes.calls = {}
    r, ln = ids.mint(ids.ROOM), ids.mint(ids.PLAYER)
    await lanes.weight(ln, 4)
    for i in range(40):
        await lanes.enqueue(r, ln, f"p{i}".encode())
    seen: list[list[Job]] = []
    pool = ConsumerPool(lanes, recorder(seen), concurrency=1, park_timeout_s=0.05)
    task = await run_pool(pool)
    await until(lambda: pool.stats.acked == 40)
    pool.stop()
    await task
    assert [len(batch) for batch in seen] == [4] * 10
    # 10 batches + the round that acked the last one and found nothing + at most a round
    # after each of the waiter's timeouts (on a loaded machine, stopping may come before the
    # woken consumer runs again, after more than one timeout: those rounds never happen)
    calls = lanes.calls["ack_wclaims"]
    assert 11 <= calls <= 11 + pool.stats.waits
    assert "ack_many" not in lanes.calls and "wclaim" not in lanes.calls
    assert await env.lanes.check() == []


async def test_sigterm_stops_gracefully(env: Env) -> None:
    r, ln = ids.mint(ids.ROOM), ids.mint(ids.PLAYER)
    await env.lanes.enqueue(r, ln, b"x")
    started = asyncio.Event()

    async def handler(jobs: list[Job]) -> None:
        started.set()
        await asyncio.sleep(0.1)

    pool = ConsumerPool(env.lanes, handler, concurrency=2)
    task = asyncio.create_task(pool.run())
    await asyncio.sleep(0)
    pool.install_signal_handlers()
    await started.wait()
    os.kill(os.getpid(), signal.SIGTERM)
    async with asyncio.timeout(5):
        await task
    assert pool.stopping and pool.stats.acked == 1
    assert "active" not in await env.dump()


async def test_long_handler_keeps_its_lease(env: Env) -> None:
    r, ln = ids.mint(ids.ROOM), ids.mint(ids.PLAYER)
    jid = await env.lanes.enqueue(r, ln, b"x")
    scores: list[float] = []

    async def handler(jobs: list[Job]) -> None:
        for _ in range(4):
            await asyncio.sleep(0.1)
            score = await env.client.zscore(env.keys.active, jid)
            assert score is not None
            scores.append(score)

    pool = ConsumerPool(env.lanes, handler, concurrency=1, lease_ms=300)
    task = await run_pool(pool)
    await until(lambda: pool.stats.acked == 1)
    pool.stop()
    await task
    assert scores[-1] > scores[0]  # the heartbeat moved the deadline forward
    assert pool.stats.stale == 0


async def test_maintenance_reaps_what_a_dead_worker_left(env: Env) -> None:
    """A killed worker's leases expire; the pool serves those jobs again (more than one
    reap batch of them), with the fencing token moved on."""

    lanes = Lanes(env.client, env.queue, batch=2)
    r, ln = ids.mint(ids.ROOM), ids.mint(ids.PLAYER)
    jids = [await lanes.enqueue(r, ln, f"p{i}".encode()) for i in range(5)]
    dead_worker = [await lanes.claim(60_000) for _ in range(5)]
    assert all(dead_worker)
    await env.expire(*jids)
    seen: list[list[Job]] = []
    pool = ConsumerPool(lanes, recorder(seen), concurrency=2, maintenance_interval_s=30)
    task = await run_pool(pool)
    await until(lambda: pool.stats.acked == 5)
    pool.stop()
    await task
    assert pool.stats.reaped == 5
    assert sorted(job.id for batch in seen for job in batch) == sorted(jids)
    assert {job.attempts for batch in seen for job in batch} == {2}
    assert [await lanes.ack(job) for job in dead_worker if job] == [False] * 5
    assert await lanes.check() == []
