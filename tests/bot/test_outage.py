"""Redis unreachable at the bot: the player is told to try again and nothing is half-written."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from sqlalchemy import func, select

from codemojex.db import Guess, Player
from codemojex.game import texts
from codemojex.locale import EN
from tests.bot.conftest import ADMIN, ALICE, World, bot_world, seed_round, valid_guess
from tests.conftest import REDIS_URL
from tests.support import free_port, wipe_tables

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.usefixtures("empty_tables")]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(bot_database_url: str, bot_queue: str) -> AsyncIterator[World]:
    # No retries: redis-py's default backoff would make each refusal take seconds; the answer
    # the player gets is the same.
    dead = aioredis.Redis(
        host="127.0.0.1",
        port=free_port(),  # nobody listens there
        socket_connect_timeout=0.5,
        retry=Retry(NoBackoff(), 0),
    )
    async with bot_world(bot_database_url, bot_queue, redis=dead) as world:
        yield world


@pytest_asyncio.fixture(loop_scope="module")
async def empty_tables(world: World) -> AsyncIterator[None]:
    await wipe_tables(world.engine, restart_ids=False)
    world.errors.clear()
    yield
    assert world.errors == []


async def test_guesses_and_commands_ask_to_try_again(world: World, bot_queue: str) -> None:
    chat = world.new_group()
    _, rnd = await seed_round(world, chat)
    asked = [
        world.standin.send_text(chat, ALICE, f"/g {valid_guess(rnd)}"),
        world.standin.send_text(chat, ALICE, valid_guess(rnd, 1)),
        world.standin.send_text(chat, ADMIN, "/pause"),
        world.standin.send_text(chat, ADMIN, "/queue"),
    ]
    await world.settle()
    for mid in asked:
        assert world.replies_to(chat, mid) == [texts.try_again(EN)]

    async with world.sessionmaker() as session:
        assert (await session.execute(select(func.count()).select_from(Guess))).scalar() == 0
        assert (await session.execute(select(func.count()).select_from(Player))).scalar() == 0
    real = aioredis.Redis.from_url(REDIS_URL)
    try:
        assert [k async for k in real.scan_iter(match=f"*{{{bot_queue}}}*")] == []
    finally:
        await real.aclose()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world_without_postgres(bot_queue: str) -> AsyncIterator[World]:
    url = f"postgresql+asyncpg://postgres@127.0.0.1:{free_port()}/nothing"
    async with bot_world(url, bot_queue + "p") as world:
        yield world


async def test_database_down_asks_to_try_again(world_without_postgres: World) -> None:
    world = world_without_postgres
    chat = world.new_group()
    asked = [
        world.standin.send_text(chat, ALICE, "/g 🍎🍌🍇🍒"),
        world.standin.send_text(chat, ALICE, "/newgame"),
        world.standin.send_text(chat, ADMIN, "/pause"),
    ]
    helped = world.standin.send_text(chat, ALICE, "/help")
    await world.settle()
    for mid in asked:
        assert world.replies_to(chat, mid) == [texts.try_again(EN)]
    assert world.replies_to(chat, helped) == [texts.help_text(EN)]
    assert world.errors == []
