"""Fairness on the real Redis: a flooding room cannot starve quiet rooms, and a room's
ceiling holds under many concurrent consumers."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Iterable

from codemojex.lanes import ConsumerPool, Job
from codemojex.values import ids
from tests.lanes.conftest import Env


async def gather_chunked(coros: Iterable[Awaitable[str]], size: int = 50) -> list[str]:
    out: list[str] = []
    batch: list[Awaitable[str]] = []
    for coro in coros:
        batch.append(coro)
        if len(batch) == size:
            out += await asyncio.gather(*batch)
            batch = []
    return out + list(await asyncio.gather(*batch))


async def flood_and_quiet(env: Env) -> tuple[str, set[str]]:
    flood = ids.mint(ids.ROOM)
    players = [ids.mint(ids.PLAYER) for _ in range(50)]
    await gather_chunked(env.lanes.enqueue(flood, players[i % 50], b"f") for i in range(5_000))
    quiet = {ids.mint(ids.ROOM) for _ in range(200)}
    await gather_chunked(env.lanes.enqueue(r, ids.mint(ids.PLAYER), b"q") for r in quiet)
    return flood, quiet


async def test_quiet_rooms_are_served_within_201_claims(real_env: Env) -> None:
    flood, quiet = await flood_and_quiet(real_env)
    served = []
    for _ in range(201):
        job = await real_env.lanes.claim(60_000)
        assert job is not None
        served.append(job.room)
    assert set(served) - {flood} == quiet
    assert served.count(flood) == 1
    assert await real_env.lanes.check() == []


async def test_weighted_claims_give_the_flood_one_turn_per_rotation(real_env: Env) -> None:
    flood, quiet = await flood_and_quiet(real_env)
    snap = await real_env.lanes.snapshot(flood)
    for lane in snap["rooms"][flood]["lanes"]:
        await real_env.lanes.weight(lane, 8)
    turns = [await real_env.lanes.wclaim(60_000) for _ in range(201)]
    flood_turns = [batch for batch in turns if batch[0].room == flood]
    assert {batch[0].room for batch in turns} - {flood} == quiet
    assert len(flood_turns) == 1 and len(flood_turns[0]) == 8  # weight 8: 8 heads, one turn
    # players of the flood room rotate too: the next turns serve different players
    more = [await real_env.lanes.wclaim(60_000) for _ in range(5)]
    assert len({batch[0].lane for batch in more}) == 5


async def test_ceiling_of_3_holds_under_16_consumers(real_env: Env) -> None:
    env = real_env
    capped = ids.mint(ids.ROOM)
    await env.lanes.limit(capped, 3)
    players = [ids.mint(ids.PLAYER) for _ in range(10)]
    for p in players[:5]:
        await env.lanes.weight(p, 4)  # weighted claims must bend to the headroom too
    capped_jobs = set(
        await gather_chunked(env.lanes.enqueue(capped, players[i % 10], b"c") for i in range(200))
    )
    others = [ids.mint(ids.ROOM) for _ in range(6)]
    await gather_chunked(
        env.lanes.enqueue(others[i % 6], ids.mint(ids.PLAYER), b"o") for i in range(120)
    )
    total = 320
    in_handlers = {"now": 0, "max": 0}
    seen_active: list[int] = []
    seen_gactive: list[int] = []
    rng = random.Random(3)

    async def handler(jobs: list[Job]) -> None:
        mine = sum(1 for job in jobs if job.room == capped)
        in_handlers["now"] += mine
        in_handlers["max"] = max(in_handlers["max"], in_handlers["now"])
        await asyncio.sleep(rng.uniform(0.001, 0.006))
        in_handlers["now"] -= mine

    pool = ConsumerPool(env.lanes, handler, concurrency=16, lease_ms=60_000)
    task = asyncio.create_task(pool.run())

    async def watch() -> None:
        while not pool.stopping:
            pipe = env.client.pipeline(transaction=True)
            pipe.zrange(env.keys.active, 0, -1)
            pipe.hget(env.keys.gactive, capped)
            active, gactive = await pipe.execute()
            seen_active.append(sum(1 for j in active if j.decode() in capped_jobs))
            seen_gactive.append(int(gactive or 0))
            await asyncio.sleep(0)

    watcher = asyncio.create_task(watch())
    async with asyncio.timeout(60):
        while pool.stats.acked < total:  # noqa: ASYNC110 - the pool's counters are its API
            await asyncio.sleep(0.01)
    pool.stop()
    await task
    await watcher
    assert pool.stats.acked == total and pool.stats.stale == 0
    assert len(seen_active) > 20
    assert max(seen_active) <= 3 and max(seen_gactive) <= 3 and in_handlers["max"] <= 3
    assert max(seen_gactive) == 3  # the ceiling was reached, so the bound was tested
    assert await env.lanes.check() == []
