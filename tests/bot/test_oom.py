"""Redis full (maxmemory, noeviction) at the bot: a new guess waits for room (its sender told
once that the game is catching up), and nothing queued is lost.

A Redis of its own (no persistence) on a free port: the shared one is never reconfigured."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio
from redis.exceptions import OutOfMemoryError

from codemojex.game import texts
from codemojex.locale import EN
from codemojex.values.jobs import GuessJob
from tests.bot.conftest import (
    ALICE,
    BOB,
    World,
    bot_world,
    own_redis_server,
    ready_client,
    seed_round,
    valid_guess,
)

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server"),
]


@pytest.fixture(scope="module")
def small_redis() -> Iterator[str]:
    with own_redis_server("--maxmemory-policy", "noeviction") as url:
        yield url


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(bot_database_url: str, bot_queue: str, small_redis: str) -> AsyncIterator[World]:
    client = await ready_client(small_redis)
    async with bot_world(bot_database_url, bot_queue, redis=client) as world:
        yield world


async def test_a_full_redis_holds_new_guesses_until_it_has_room_and_keeps_queued_ones(
    world: World,
) -> None:
    chat = world.new_group()
    _, rnd = await seed_round(world, chat)
    kept = [world.standin.send_text(chat, ALICE, valid_guess(rnd, i)) for i in range(2)]
    await world.settle()
    assert await world.queued() == 2

    # Lower maxmemory under what is used: every write is refused from now on (filling the memory
    # instead is racy, the usage moves with client buffers).
    await world.redis.config_set("maxmemory", "100kb")
    with pytest.raises(OutOfMemoryError):
        await world.redis.set("probe", b"1")
    waiting = world.standin.send_text(chat, BOB, valid_guess(rnd))
    told = await world.standin.wait_for_sent(
        lambda m: m.reply_to_message_id == waiting, 20, chat_id=chat
    )
    assert told.text == texts.catching_up(EN)
    assert await world.queued() == 2

    await world.redis.config_set("maxmemory", "0")
    await world.settle()  # the waiting guess is taken once Redis has room again
    assert await world.queued() == 3
    again = world.standin.send_text(chat, BOB, valid_guess(rnd, 1))
    await world.settle()
    assert world.replies_to(chat, again) == []
    assert world.replies_to(chat, waiting) == [texts.catching_up(EN)]
    served = []
    while (job := await world.lanes.claim(10_000)) is not None:
        served.append(GuessJob.decode(job.payload).message_id)
        await world.lanes.ack(job)
    assert sorted(served) == sorted([*kept, waiting, again])
    assert await world.lanes.check() == []
    assert world.errors == []
