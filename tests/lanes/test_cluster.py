"""The lanes on a Redis Cluster (the session's own, three masters): where a queue's keys
live, scripts loaded again on a node that lost them, and a consumer pool draining a queue
with acks and parking on the wake list. The verb tests run on the cluster too (`env`)."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.exceptions import ClusterError

from codemojex.lanes import ConsumerPool, Job, Lanes
from codemojex.lanes.keys import Keys
from codemojex.values import ids
from tests.helpers.support import drop_keys


async def _owners(client: RedisCluster, pattern: str) -> Counter[str]:
    """How many keys matching `pattern` each master holds."""
    out: Counter[str] = Counter()
    for node in client.get_primaries():
        keys = await client.keys(pattern, target_nodes=node)
        if keys:
            out[node.name] = len(keys)
    return out


async def test_a_queue_lives_on_the_node_owning_its_slot(
    cluster_redis: RedisCluster, queue_name: str
) -> None:
    """Every key of a queue (and the bot's and sender's `cmx:{q}` keys) hashes to the slot
    of `{q}`, so the whole queue is on one master; other queues spread over the others."""
    await cluster_redis.initialize()  # the slot map, for get_node_from_key
    # Queues whose slots belong to three different masters.
    by_node: dict[str, str] = {}
    n = 0
    while len(by_node) < 3:
        name = f"{queue_name}-{n}"
        node = cluster_redis.get_node_from_key(Keys(name).prefix)
        assert node is not None
        by_node.setdefault(node.name, name)
        n += 1
    try:
        for owner, name in by_node.items():
            lanes = Lanes(cluster_redis, name)
            room = ids.mint(ids.ROOM)
            for i in range(6):
                await lanes.enqueue(room, ids.mint(ids.PLAYER), b"x", dedupe_key=f"m{i}")
            await lanes.limit(room, 2)
            [job] = [j for j in [await lanes.claim(30_000)] if j is not None]
            await lanes.retry(job, 60_000, "later")
            await cluster_redis.set(f"cmx:{{{name}}}:flood:{ids.mint(ids.PLAYER)}", b"1")
            assert await lanes.check() == []
            assert set(await _owners(cluster_redis, f"emq:{{{name}}}:*")) == {owner}
            assert set(await _owners(cluster_redis, f"cmx:{{{name}}}:*")) == {owner}
    finally:
        for name in by_node.values():
            await drop_keys(cluster_redis, name)


async def test_scripts_are_loaded_again_on_a_node_that_lost_them(
    cluster_redis: RedisCluster, queue_name: str
) -> None:
    """A replica promoted by a failover holds no scripts (SCRIPT LOAD is not replicated):
    the EVALSHA answers NOSCRIPT, the script is loaded and the call made again."""
    lanes = Lanes(cluster_redis, queue_name)
    room, lane = ids.mint(ids.ROOM), ids.mint(ids.PLAYER)
    first = await lanes.enqueue(room, lane, b"one")
    assert await cluster_redis.script_flush()  # on every master
    second = await lanes.enqueue(room, lane, b"two")
    batch = await lanes.wclaim(30_000)
    assert [j.id for j in batch] == [first]
    assert await cluster_redis.script_flush()  # on every master
    assert await lanes.ack_many(batch) == 1
    job = await lanes.claim(30_000)
    assert job is not None and job.id == second


async def test_no_verb_runs_while_the_queues_slot_migrates(
    cluster_redis: RedisCluster, queue_name: str
) -> None:
    """While the queue's slot moves to another master (resharding), a script is refused
    (TRYAGAIN, retried by redis-py until it gives up) instead of running on the importing
    node against the few keys that arrived there; once the slot is stable it runs again.
    The scripts declare a second key beside the prefix, which names no key, for this."""
    await cluster_redis.initialize()
    lanes = Lanes(cluster_redis, queue_name)
    room, lane = ids.mint(ids.ROOM), ids.mint(ids.PLAYER)
    first = await lanes.enqueue(room, lane, b"one")
    slot = cluster_redis.keyslot(lanes.keys.prefix)
    source = cluster_redis.get_node_from_key(lanes.keys.prefix)
    assert source is not None
    [target, *_] = [n for n in cluster_redis.get_primaries() if n.name != source.name]
    source_id = await cluster_redis.cluster_myid(source)
    target_id = await cluster_redis.cluster_myid(target)

    async def setslot(node: ClusterNode, *args: bytes | str) -> None:
        await cluster_redis.execute_command("CLUSTER SETSLOT", slot, *args, target_nodes=node)

    await setslot(target, "IMPORTING", source_id)
    await setslot(source, "MIGRATING", target_id)
    try:
        with pytest.raises(ClusterError):
            await lanes.enqueue(room, lane, b"two")
        with pytest.raises(ClusterError):
            await lanes.claim(30_000)
        assert await cluster_redis.keys(f"{lanes.keys.prefix}*", target_nodes=target) == []
    finally:
        await setslot(source, "STABLE")
        await setslot(target, "STABLE")
    job = await lanes.claim(30_000)
    assert job is not None and job.id == first
    assert await lanes.ack(job)
    assert await lanes.check() == []


async def test_a_consumer_pool_drains_a_queue_on_a_cluster(
    cluster_redis: RedisCluster, queue_name: str
) -> None:
    """Eight consumers park on the wake list (BLPOP on the queue's node), are woken by the
    enqueues, and serve and ack every job once; afterwards the queue holds nothing but its
    counter."""
    lanes = Lanes(cluster_redis, queue_name)
    served: Counter[str] = Counter()

    async def handler(jobs: list[Job]) -> None:
        served.update(j.id for j in jobs)
        await asyncio.sleep(0.001)

    pool = ConsumerPool(lanes, handler, concurrency=8, park_timeout_s=5, maintenance_interval_s=0.5)
    task = asyncio.create_task(pool.run())
    async with asyncio.timeout(10):
        while pool.stats.parks < 8:  # noqa: ASYNC110 - the pool's counters are its interface
            await asyncio.sleep(0.01)
    rooms = [ids.mint(ids.ROOM) for _ in range(10)]
    players = {room: [ids.mint(ids.PLAYER) for _ in range(4)] for room in rooms}
    for room in rooms[:3]:
        await lanes.limit(room, 1)
    await lanes.weight(players[rooms[0]][0], 3)
    enqueued = [
        await lanes.enqueue(room, players[room][i % 4], f"{room}:{i}".encode())
        for i in range(20)
        for room in rooms
    ]
    try:
        async with asyncio.timeout(20):
            while pool.stats.acked < len(enqueued):  # noqa: ASYNC110
                await asyncio.sleep(0.01)
    finally:
        pool.stop()
        await asyncio.wait_for(task, 10)
    assert served == Counter(enqueued)
    assert pool.stats.acked == len(enqueued)
    assert pool.stats.failures == 0
    assert await lanes.check() == []
    left = [k async for k in cluster_redis.scan_iter(match=f"{lanes.keys.prefix}*")]
    assert {k.decode()[len(lanes.keys.prefix) :] for k in left} <= {
        "seq",
        "lroom",
        "lseen",
        "rseen",
        "glimit",
        "gweight",
        "wake",
    } | {f"r:{room}:lanes" for room in rooms}
