"""Redis loses its data under a running bot (a restart without persistence; FLUSHALL on a
redis-server this test starts itself, never the machine's): every room that takes a guess
has its ceiling again (the database's, through the room's card), its players keep their
ids, and nothing is taken into a round the database does not have open."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio

from codemojex import usecases
from codemojex.game import texts
from codemojex.locale import EN
from tests.bot.conftest import (
    ADMIN,
    ALICE,
    BOB,
    World,
    bot_world,
    own_redis_server,
    ready_client,
    room_of,
    start_round,
    valid_guess,
)
from tests.helpers.support import wipe_tables

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server"),
]

ROOMS = 30


@pytest.fixture(scope="module")
def own_redis() -> Iterator[str]:
    with own_redis_server() as url:
        yield url


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(bot_database_url: str, bot_queue: str, own_redis: str) -> AsyncIterator[World]:
    client = await ready_client(own_redis)
    async with bot_world(bot_database_url, bot_queue, redis=client) as world:
        await wipe_tables(world.engine, restart_ids=False)
        yield world


async def test_every_room_that_takes_a_guess_has_its_ceiling_again(world: World) -> None:
    chats = [world.new_group() for _ in range(ROOMS)]
    rounds = [await start_round(world, chat) for chat in chats]
    limited = world.standin.send_text(chats[0], ADMIN, "/limit 5")
    for chat, rnd in zip(chats, rounds, strict=True):
        world.standin.send_text(chat, BOB, valid_guess(rnd))
    await world.settle()
    assert world.replies_to(chats[0], limited) == [texts.limit_set(EN, 5)]
    rooms = [await room_of(world, chat) for chat in chats]
    # Alice plays in the first room with a player row (written by a worker, as after her
    # first scored guess): her lane is that id.
    alice = await usecases.ensure_player(world.sessionmaker, rooms[0].id, ALICE, "Alice")
    world.standin.send_text(chats[0], ALICE, valid_guess(rounds[0], 1))
    await world.settle()
    assert await world.queued() == ROOMS + 1

    await world.redis.flushall()
    # The bot still remembers every room's card and seat: the enqueue finds none in Redis,
    # so the bot reads each card from the database again and enqueues.
    asked = []
    for chat, rnd in zip(chats, rounds, strict=True):
        asked.append((chat, world.standin.send_text(chat, BOB, valid_guess(rnd, 2))))
    alice_again = world.standin.send_text(chats[0], ALICE, valid_guess(rounds[0], 3))
    await world.settle()
    assert await world.queued() == ROOMS + 1
    for chat, mid in asked:
        assert world.replies_to(chat, mid) == []
    snapshot = await world.lanes.snapshot()
    ceilings = {room.id: snapshot["rooms"][room.id]["ceiling"] for room in rooms}
    assert ceilings == {room.id: 5 if room.id == rooms[0].id else 2 for room in rooms}
    assert world.replies_to(chats[0], alice_again) == []
    alice_lanes = [
        lane for lane, view in snapshot["rooms"][rooms[0].id]["lanes"].items() if view["depth"]
    ]
    assert alice.id in alice_lanes
    assert await world.lanes.check() == []
    assert world.errors == []


async def test_a_round_closed_while_redis_was_away_takes_no_guess(world: World) -> None:
    """The card is read from the database after the loss: a round the database closed
    meanwhile is over for the bot too, whatever it remembered."""
    chat = world.new_group()
    rnd = await start_round(world, chat)
    world.standin.send_text(chat, BOB, valid_guess(rnd))
    await world.settle()
    await world.redis.flushall()
    await usecases.close_round(world.sessionmaker, rnd.id, "endround")
    asked = world.standin.send_text(chat, BOB, f"/g {valid_guess(rnd, 1)}")
    await world.settle()
    assert world.replies_to(chat, asked) == [texts.no_round(EN)]
    assert await world.queued() == 0
