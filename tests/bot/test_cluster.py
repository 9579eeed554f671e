"""The bot on a Redis Cluster (the session's own): guesses enqueued, a flood told to slow
down once (the notice flag), a paused room's note once per player (the pause set read
beside the flag), the answers paced by the shared pacer's scripts; while the queue's slot
migrates, a guess is answered "try again" and nothing is queued."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from redis.asyncio import Redis
from redis.asyncio.cluster import ClusterNode, RedisCluster

from codemojex.game import texts
from codemojex.locale import EN
from codemojex.runtime import GatedRedisCluster
from tests.bot.conftest import (
    ALICE,
    World,
    bot_world,
    flood_gets_one_slow_down,
    paused_room_notes_once_per_player,
    seed_round,
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
    await flood_gets_one_slow_down(world)
    assert world.errors == []


async def test_a_paused_room_notes_once_per_player_on_a_cluster(world: World) -> None:
    await paused_room_notes_once_per_player(world)
    assert world.errors == []


async def test_a_guess_while_the_queues_slot_migrates_waits_for_it(world: World) -> None:
    """A slot migrating is an outage to the bot: the guess waits (its sender told once that
    the game is catching up) and is taken once the slot is served again, exactly once."""
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
        # A connection of the test's own to that node, no cluster client: a cluster client
        # rebuilds its nodes (closing their connections) while the slot moves.
        async with Redis(host=node.host, port=int(node.port), socket_timeout=5) as admin:
            await admin.cluster("SETSLOT", slot, *args)

    await setslot(target, "IMPORTING", ids[source.name])
    await setslot(source, "MIGRATING", ids[target.name])
    try:
        waiting = world.standin.send_text(chat, ALICE, valid_guess(rnd))
        found = await world.standin.wait_for_sent(
            lambda m: m.reply_to_message_id == waiting, 20, chat_id=chat
        )
        assert found.text == texts.catching_up(EN)
    finally:
        await setslot(source, "STABLE")
        await setslot(target, "STABLE")
    await world.settle()
    assert await world.queued() == before + 1
    taken = world.standin.send_text(chat, ALICE, valid_guess(rnd, 1))
    await world.settle()
    assert world.replies_to(chat, taken) == []
    assert world.replies_to(chat, waiting) == [texts.catching_up(EN)]
    assert await world.queued() == before + 2
    assert world.errors == []
