"""Two bot processes handling the same command message at the same moment (a rolling update
runs the old poller beside the new one; Telegram retries a webhook update a slow process still
holds): the module's running bot and a second python-telegram-bot Application on the same
Redis, Postgres and Bot API stand-in, given the same update. One takes the message's lease
and runs the command; the other waits for it (bot/once.py) and then applies nothing, says
nothing: one effect. (Without the lease, the database alone holds them to one effect:
tests/usecases/test_commands.py.)"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import func, select, text
from telegram import Update

from codemojex.bot import BotParts, CodemojexApp, CodemojexContext, build_application
from codemojex.db import AuditLog, Outbox, Round
from codemojex.lanes import Lanes
from codemojex.posting.pacer import Pacer
from codemojex.state.budget import BUDGET_MAX, AnswerBudget
from codemojex.state.keys import Keys
from codemojex.values.types import KIND_REVEAL, KIND_ROUND
from tests.bot.conftest import ADMIN, ALICE, E2E, MAX_DEPTH, UNPACED, World, open_round, start_round

pytestmark = E2E

WAITING_IN_THE_DATABASE = """
    SELECT count(*) FROM pg_locks
    WHERE NOT granted AND pid IN (
        SELECT pid FROM pg_stat_activity WHERE datname = current_database()
    )
"""


@asynccontextmanager
async def second_process(world: World) -> AsyncIterator[CodemojexApp]:
    """Another bot Application of the same token, queue, Redis and database (its own command
    marks, cards cache and answers), initialized, not polling: the test hands it updates."""
    queue = world.settings.queue
    other = build_application(
        world.settings.bot(),
        lanes=Lanes(world.redis, queue=queue),
        sessionmaker=world.sessionmaker,
        redis=world.redis,
        parts=BotParts(
            rng=random.Random(11),
            max_depth=MAX_DEPTH,
            pacer=Pacer(world.redis, queue, UNPACED),
            budget=AnswerBudget(world.redis, queue, budget=BUDGET_MAX),
        ),
    )

    async def record_error(update: object, context: CodemojexContext) -> None:
        assert context.error is not None
        world.errors.append(context.error)

    other.add_error_handler(record_error)
    await other.initialize()
    try:
        yield other
    finally:
        await other.bot_data.answers.close()
        await other.shutdown()


def update_of(world: World, other: CodemojexApp, chat: int, message_id: int) -> Update:
    """The update of that message as the second process receives it."""
    message = world.standin.message(chat, message_id)
    assert message is not None
    update = Update.de_json({"update_id": 1, "message": message}, other.bot)
    assert update is not None
    return update


async def count(world: World, stmt: Any) -> int:
    async with world.sessionmaker() as session:
        value = int((await session.execute(stmt)).scalar_one())
        await session.commit()
    return value


async def test_two_processes_with_one_endround_end_the_round_once(world: World) -> None:
    """The round's row is held by the test's own Postgres session, so the process that took
    the /endround holds its lease while it waits for the row; the other waits for the lease."""
    chat = world.new_group()
    rnd = await start_round(world, chat)
    mark = Keys(world.lanes.queue).command_seen
    async with second_process(world) as other, world.engine.connect() as conn:
        held = await conn.begin()
        await conn.execute(text("SELECT id FROM rounds WHERE id = :id FOR UPDATE"), {"id": rnd.id})
        asked = world.standin.send_text(chat, ADMIN, "/endround")
        at_once = asyncio.create_task(other.process_update(update_of(world, other, chat, asked)))
        lease: Any = None
        for _ in range(100):
            lease = await world.redis.get(mark(chat, asked))
            if lease is not None:
                break
            await asyncio.sleep(0.05)
        assert lease is not None and lease.startswith(b"run:")
        await asyncio.sleep(0.5)
        assert not at_once.done()  # one runs (held by the row), the other waits for it...
        # ...for its lease, not in the database: only one of them waits there (the other,
        # running it too, would wait for the first's audit row).
        assert await conn.scalar(text(WAITING_IN_THE_DATABASE)) == 1
        await held.rollback()
        await asyncio.wait_for(at_once, 30)
    await world.settle()

    assert await open_round(world, chat) is None
    reveals = (
        select(func.count())
        .select_from(Outbox)
        .where(Outbox.round_id == rnd.id, Outbox.kind == KIND_REVEAL)
    )
    assert await count(world, reveals) == 1
    audits = (
        select(func.count())
        .select_from(AuditLog)
        .where(AuditLog.chat_id == chat, AuditLog.message_id == asked)
    )
    assert await count(world, audits) == 1
    assert world.replies_to(chat, asked) == []  # no "no round" from the one that waited
    assert await world.redis.get(mark(chat, asked)) == b"done"


async def test_two_processes_with_one_newgame_open_one_round(world: World) -> None:
    chat = world.new_group()
    async with second_process(world) as other:
        for _ in range(3):
            asked = world.standin.send_text(chat, ALICE, "/newgame")
            await other.process_update(update_of(world, other, chat, asked))
            await world.settle()
            opened = await open_round(world, chat)
            assert opened is not None and opened.origin_message_id == asked
            assert world.replies_to(chat, asked) == []  # no "a round is running" either
            world.standin.send_text(chat, ADMIN, "/endround")
            await world.settle()
    rounds = select(func.count()).select_from(Round)
    announcements = (
        select(func.count())
        .select_from(Outbox)
        .where(Outbox.chat_id == chat, Outbox.kind == KIND_ROUND)
    )
    assert (await count(world, rounds), await count(world, announcements)) == (3, 3)
