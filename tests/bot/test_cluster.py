"""The bot on a Redis Cluster (the session's own): guesses enqueued, a flood told to slow
down once (the notice flag), a paused room's note once per player (the pause set read
beside the flag), the answers paced by the shared pacer's scripts; while the queue's slot
migrates, a guess is answered "try again" and nothing is queued."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from redis.asyncio.cluster import ClusterNode, RedisCluster

from codemojex import texts
from codemojex.runtime import GatedRedisCluster
from tests.bot.conftest import (
    ADMIN,
    ALICE,
    BOB,
    MAX_DEPTH,
    World,
    bot_world,
    seed_round,
    start_round,
    valid_guess,
)

pytestmark = [pytest.mark.asyncio(loop_scope="module")]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(
    bot_database_url: str, bot_queue: str, redis_cluster_url: str
) -> AsyncIterator[World]:
    client = GatedRedisCluster.from_url(redis_cluster_url, max_in_flight=200)
    async with bot_world(bot_database_url, bot_queue + "c", redis=client) as world:
        yield world


async def test_a_flood_gets_one_slow_down_on_a_cluster(world: World) -> None:
    chat = world.new_group()
    rnd = await start_round(world, chat)
    flood = [world.standin.send_text(chat, ALICE, valid_guess(rnd, i)) for i in range(12)]
    other = world.standin.send_text(chat, BOB, valid_guess(rnd))
    await world.settle()
    assert await world.queued() == MAX_DEPTH + 1
    notices = [m for mid in flood for m in world.replies_to(chat, mid)]
    assert notices == [texts.SLOW_DOWN]
    assert world.replies_to(chat, other) == []
    assert world.errors == []


async def test_a_paused_room_notes_once_per_player_on_a_cluster(world: World) -> None:
    chat = world.new_group()
    rnd = await start_round(world, chat)
    world.standin.send_text(chat, ADMIN, "/pause")
    await world.settle()
    alice = [world.standin.send_text(chat, ALICE, valid_guess(rnd, i)) for i in range(3)]
    bob = world.standin.send_text(chat, BOB, valid_guess(rnd))
    await world.settle()
    assert [t for mid in alice for t in world.replies_to(chat, mid)] == [texts.SCORING_PAUSED_NOTE]
    assert world.replies_to(chat, bob) == [texts.SCORING_PAUSED_NOTE]
    world.standin.send_text(chat, ADMIN, "/resume")
    await world.settle()
    after = world.standin.send_text(chat, BOB, valid_guess(rnd, 1))
    await world.settle()
    assert world.replies_to(chat, after) == []
    assert world.errors == []


async def test_a_guess_while_the_queues_slot_migrates_is_refused_cleanly(world: World) -> None:
    client = world.redis
    assert isinstance(client, RedisCluster)
    chat = world.new_group()
    _, rnd = await seed_round(world, chat)
    before = await world.queued()
    prefix = world.lanes.keys.prefix
    slot = client.keyslot(prefix)
    source = client.get_node_from_key(prefix)
    assert source is not None
    [target, *_] = [n for n in client.get_primaries() if n.name != source.name]
    ids = {n.name: await client.cluster_myid(n) for n in (source, target)}

    async def setslot(node: ClusterNode, *args: bytes | str) -> None:
        await client.execute_command("CLUSTER SETSLOT", slot, *args, target_nodes=node)

    await setslot(target, "IMPORTING", ids[source.name])
    await setslot(source, "MIGRATING", ids[target.name])
    try:
        refused = world.standin.send_text(chat, ALICE, valid_guess(rnd))
        await world.settle()
        assert world.replies_to(chat, refused) == [texts.TRY_AGAIN]
    finally:
        await setslot(source, "STABLE")
        await setslot(target, "STABLE")
    assert await world.queued() == before
    taken = world.standin.send_text(chat, ALICE, valid_guess(rnd, 1))
    await world.settle()
    assert world.replies_to(chat, taken) == []
    assert await world.queued() == before + 1
    assert world.errors == []
