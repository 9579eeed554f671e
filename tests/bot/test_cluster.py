"""The bot on a Redis Cluster (the session's own): guesses enqueued, a flood told to slow
down once (the notice flag), a paused room's note once per player (the pause set read
beside the flag), the answers paced by the shared pacer's scripts."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from codemojex import texts
from codemojex.runtime import GatedRedisCluster
from tests.bot.conftest import (
    ADMIN,
    ALICE,
    BOB,
    MAX_DEPTH,
    World,
    bot_world,
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
