"""check() names every fault of a hand-damaged keyspace; repair() fixes it, losing no job."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from codemojex.values import ids
from tests.lanes.conftest import Env


@dataclass
class World:
    a: str
    b: str
    a1: str
    a2: str
    b1: str
    pending_a1: list[str]
    active_a: str
    delayed_b: str


async def build(env: Env) -> World:
    """Room a (ceiling 2): lane a1 with 2 pending, lane a2 with 1 in flight; room b: lane b1
    with 1 pending and 1 delayed."""
    a, b = ids.mint(ids.ROOM), ids.mint(ids.ROOM)
    a1, a2, b1 = ids.mint(ids.PLAYER), ids.mint(ids.PLAYER), ids.mint(ids.PLAYER)
    await env.lanes.limit(a, 2)
    ja2 = await env.lanes.enqueue(a, a2, b"a2")
    held = await env.lanes.claim(60_000)
    assert held is not None and held.id == ja2
    jb = await env.lanes.enqueue(b, b1, b"b1")
    got = await env.lanes.claim(60_000)
    assert got is not None and got.id == jb
    assert await env.lanes.retry(got, 600_000, "later") == "delayed"
    pa = [await env.lanes.enqueue(a, a1, f"a1-{i}".encode()) for i in range(2)]
    await env.lanes.enqueue(b, b1, b"b1-2")
    assert await env.lanes.check() == []
    return World(a, b, a1, a2, b1, pa, ja2, jb)


Damage = Callable[[Env, World], Awaitable[list[str]]]


async def gactive_off_by_one(env: Env, w: World) -> list[str]:
    await env.client.hincrby(env.keys.gactive, w.a, 1)
    return [
        f"gactive of room {w.a} is 2 but the room has 1 jobs in active",
    ]


async def room_missing_from_ring(env: Env, w: World) -> list[str]:
    await env.client.lrem(env.keys.ring, 0, w.a)
    return [f"room {w.a} is serviceable but missing from the room ring"]


async def room_twice_on_ring(env: Env, w: World) -> list[str]:
    await env.client.rpush(env.keys.ring, w.b)
    return [f"room {w.b} appears 2 times on the room ring"]


async def lane_missing_from_its_lane_ring(env: Env, w: World) -> list[str]:
    await env.client.lrem(env.keys.lane_ring(w.b), 0, w.b1)
    # the room still has a serviceable lane, so its own place on the ring is right
    return [f"lane {w.b1} is serviceable but missing from the lane ring of room {w.b}"]


async def lane_twice_on_its_lane_ring(env: Env, w: World) -> list[str]:
    await env.client.rpush(env.keys.lane_ring(w.a), w.a1)
    return [f"lane {w.a1} appears 2 times on the lane ring of room {w.a}"]


async def paused_lane_left_on_ring(env: Env, w: World) -> list[str]:
    await env.client.sadd(env.keys.paused, w.a1)
    return [
        f"lane {w.a1} is on the lane ring of room {w.a} but is paused",
        f"room {w.a} is on the room ring but is not serviceable: no serviceable lane",
        f"lane {w.a1} is paused with pending jobs but missing from the held set of room {w.a}",
    ]


async def job_lost_its_place(env: Env, w: World) -> list[str]:
    await env.client.zrem(env.keys.pending(w.a1), w.pending_a1[0])
    return [
        f"job {w.pending_a1[0]} has a job hash but is in no lane, active, delayed or dead",
        # the operators' books still count it
        "npending is 3 but 2 jobs are pending",
        f"rdepth of room {w.a} is 2 but should be 1",
        f"lhead of lane {w.a1} is 3 but should be 4",
    ]


async def job_in_two_places(env: Env, w: World) -> list[str]:
    await env.client.zadd(env.keys.dead, {w.active_a: 1})
    return [
        f"job {w.active_a} is in 2 places: active, dead",
        f"job {w.active_a} is in dead but its state is active",
    ]


async def wrong_state(env: Env, w: World) -> list[str]:
    await env.client.hset(env.keys.job(w.delayed_b), "t", "pending")
    return [f"job {w.delayed_b} is in delayed but its state is pending"]


async def wrong_score(env: Env, w: World) -> list[str]:
    await env.client.zadd(env.keys.pending(w.a1), {w.pending_a1[1]: 0})
    return [f"job {w.pending_a1[1]} is pending at score 0 but its seq is 4"]


async def lane_missing_from_lseen(env: Env, w: World) -> list[str]:
    await env.client.zrem(env.keys.lseen, w.a1)
    return [f"lane {w.a1} is bound to room {w.a} but has no entry in lseen"]


async def unbound_lane_in_lseen(env: Env, w: World) -> list[str]:
    stray = ids.mint(ids.PLAYER)
    await env.client.zadd(env.keys.lseen, {stray: 1})
    return [f"lane {stray} is in lseen but bound to no room"]


async def lane_of_a_job_in_flight_forgotten(env: Env, w: World) -> list[str]:
    await env.client.hdel(env.keys.lroom, w.a2)
    await env.client.srem(env.keys.room_lanes(w.a), w.a2)
    await env.client.zrem(env.keys.lseen, w.a2)
    return [f"job {w.active_a} of room {w.a} is active but its lane {w.a2} is bound to room nil"]


async def ldelayed_off_by_one(env: Env, w: World) -> list[str]:
    await env.client.hincrby(env.keys.ldelayed, w.b1, 1)
    return [f"ldelayed of lane {w.b1} is 2 but the lane has 1 jobs in delayed"]


async def ldelayed_missing(env: Env, w: World) -> list[str]:
    await env.client.hdel(env.keys.ldelayed, w.b1)
    return [f"lane {w.b1} has 1 jobs in delayed but no ldelayed entry"]


async def held_lane_not_paused(env: Env, w: World) -> list[str]:
    await env.client.sadd(env.keys.room_held(w.a), w.a1)
    return [
        f"lane {w.a1} is in the held set of room {w.a} but is not a paused lane of the room "
        "with pending jobs"
    ]


DAMAGES = [
    gactive_off_by_one,
    room_missing_from_ring,
    room_twice_on_ring,
    lane_missing_from_its_lane_ring,
    lane_twice_on_its_lane_ring,
    job_lost_its_place,
    job_in_two_places,
    wrong_state,
    wrong_score,
    lane_missing_from_lseen,
    unbound_lane_in_lseen,
    lane_of_a_job_in_flight_forgotten,
    ldelayed_off_by_one,
    ldelayed_missing,
    held_lane_not_paused,
]


def jobs_of(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k.startswith("job:")}


def sans_wake(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k != "wake"}


@pytest.mark.parametrize("damage", DAMAGES, ids=[d.__name__ for d in DAMAGES])
async def test_check_names_the_fault_and_repair_fixes_it(env: Env, damage: Damage) -> None:
    w = await build(env)
    sound = await env.dump()
    expected = await damage(env, w)
    assert await env.lanes.check() == sorted(expected)
    fixes = await env.lanes.repair()
    assert fixes, "repair must say what it fixed"
    assert await env.lanes.check() == []
    assert await env.lanes.repair() == []
    repaired = await env.dump()
    assert jobs_of(repaired) == jobs_of(sound)  # no job lost, none changed
    if damage is room_missing_from_ring:
        # the room comes back at the tail of the ring
        assert sorted(repaired.pop("ring")) == sorted(sound.pop("ring"))
    if damage in (lane_missing_from_lseen, lane_of_a_job_in_flight_forgotten):
        # the lane is back in lseen, seen at the repair
        assert {m for m, _ in repaired.pop("lseen")} == {m for m, _ in sound.pop("lseen")}
    assert sans_wake(repaired) == sans_wake(sound)


async def test_paused_lane_left_on_its_ring_is_dropped(env: Env) -> None:
    w = await build(env)
    sound = await env.dump()
    expected = await paused_lane_left_on_ring(env, w)
    assert await env.lanes.check() == sorted(expected)
    fixes = await env.lanes.repair()
    assert f"removed lane {w.a1} from the lane ring of room {w.a}: not serviceable" in fixes
    assert f"removed room {w.a} from the room ring: not serviceable" in fixes
    assert await env.lanes.check() == []
    d = await env.dump()
    assert jobs_of(d) == jobs_of(sound)
    assert d["ring"] == [w.b] and f"r:{w.a}:ring" not in d and d["paused"] == {w.a1}


async def test_repair_reports_each_fix(env: Env) -> None:
    w = await build(env)
    await gactive_off_by_one(env, w)
    await room_twice_on_ring(env, w)
    await lane_missing_from_its_lane_ring(env, w)
    fixes = await env.lanes.repair()
    assert f"gactive of room {w.a}: 2 -> 1" in fixes
    assert f"removed a duplicate of room {w.b} from the room ring" in fixes
    assert f"added missing lane {w.b1} to the lane ring of room {w.b}" in fixes
    assert await env.lanes.check() == []


async def test_ghost_ids_without_a_hash_are_dropped(env: Env) -> None:
    w = await build(env)
    ghost = ids.mint(ids.JOB)
    await env.client.zadd(env.keys.pending(w.b1), {ghost: 99})
    problems = await env.lanes.check()
    assert f"job {ghost} is in pending of lane {w.b1} but has no job hash" in problems
    fixes = await env.lanes.repair()
    assert f"dropped id {ghost} from pending of lane {w.b1}: it has no job hash" in fixes
    assert await env.lanes.check() == []


async def test_a_stuck_ceiling_is_released_by_repair(env: Env) -> None:
    """The known failure of other queues: an in-flight counter that drifts up wedges a room
    at its ceiling for good. check() sees it and repair() frees the room."""
    w = await build(env)
    await env.client.hincrby(env.keys.gactive, w.a, 1)  # 2 of 2: a is held off the ring
    await env.client.lrem(env.keys.ring, 0, w.a)
    assert await env.lanes.check() == sorted(
        [
            f"gactive of room {w.a} is 2 but the room has 1 jobs in active",
            f"room {w.a} is serviceable but missing from the room ring",
        ]
    )
    await env.lanes.repair()
    assert await env.lanes.check() == []
    served = {(await env.lanes.claim(60_000) or pytest.fail("empty")).room for _ in range(2)}
    assert w.a in served


async def test_shallow_check_reads_only_what_the_books_reach(env: Env) -> None:
    w = await build(env)
    await gactive_off_by_one(env, w)
    orphan, *books = await job_lost_its_place(env, w)
    shallow = await env.lanes.check(deep=False)
    deep = await env.lanes.check()
    # the books see the job gone from its lane; only the deep check finds its hash
    assert shallow == sorted([f"gactive of room {w.a} is 2 but the room has 1 jobs in active",
                              *books])  # fmt: skip
    assert sorted(deep) == sorted([*shallow, orphan])
