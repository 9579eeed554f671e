"""What an update does on each try happens once per update, however often an outage makes the
door try it again: its answer budget is spent once (state/budget.py, keyed on the update),
and "the game is catching up" is said once per member and chat while the outage lasts, in
every process together (state/flags.py `CatchingUp`), taps included (as their toast).

The bot reaches Postgres through a proxy the tests cut for `OUTAGE_S` (the machine's Postgres
is never touched), as tests/bot/test_postgres_away.py does; the answer budget is the default
(`budgeted`), which the suite's other outage tests leave out."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from telegram import InlineKeyboardMarkup, Update

from codemojex.bot import BotParts, build_application
from codemojex.bot.app import make_door
from codemojex.bot.drafts import TapRate
from codemojex.game import taps, texts
from codemojex.locale import EN
from codemojex.outages import OUTAGES
from codemojex.posting.pacer import Pacer
from codemojex.state.budget import BUDGET, AnswerBudget
from codemojex.state.flags import CATCHING_UP_S
from codemojex.state.keys import Keys
from tests.bot.conftest import (
    ADMIN,
    ALICE,
    BOB,
    DAVE,
    OPERATOR,
    UNPACED,
    World,
    bot_world,
    room_of,
    start_round,
    through,
)
from tests.e2e.harness import eventually
from tests.helpers.support import drop_keys, wipe_tables
from tests.ops.proxy import TcpProxy

pytestmark = pytest.mark.asyncio(loop_scope="module")

OUTAGE_S = 8.0
REFUSALS = (texts.answers_spent(EN), texts.try_again(EN), texts.went_wrong(EN))


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(bot_database_url: str, bot_queue: str, proxy: TcpProxy) -> AsyncIterator[World]:
    async with bot_world(through(bot_database_url, proxy), bot_queue) as world:
        answers = world.app.bot_data.answers
        answers.budget = AnswerBudget(world.redis, bot_queue, budget=BUDGET)  # the default
        await wipe_tables(world.engine, restart_ids=False)
        await drop_keys(world.redis, bot_queue)
        yield world


async def outage(proxy: TcpProxy, seconds: float = OUTAGE_S) -> asyncio.Task[None]:
    """Postgres away from now on; the task that lets it back after `seconds`."""
    await proxy.stop()

    async def back() -> None:
        try:
            await asyncio.sleep(seconds)
        finally:
            await proxy.start()

    return asyncio.ensure_future(back())


def catching_up_to(world: World, chat: int, message_ids: list[int]) -> int:
    return sum(world.replies_to(chat, mid).count(texts.catching_up(EN)) for mid in message_ids)


async def test_paid_commands_through_an_outage_at_the_default_budget(
    world: World, proxy: TcpProxy
) -> None:
    """/stats, /top, /rules, /help and /daily in a group through an 8 s Postgres outage:
    each answered as usual once the database is back, never "slow down" (its budget is
    spent once, not once a try); each member told once that the game is catching up."""
    chat = world.new_group()
    await start_round(world, chat)
    asked = {}
    stopped = await outage(proxy)
    for who, command in ((ALICE, "/stats"), (BOB, "/top"), (DAVE, "/rules"), (ADMIN, "/daily"),
                         (OPERATOR, "/help")):  # fmt: skip
        asked[command] = (who, world.standin.send_text(chat, who, command))
    await stopped
    await world.settle()
    for command, (_, mid) in asked.items():
        said = [t for t in world.replies_to(chat, mid) if t != texts.catching_up(EN)]
        assert len(said) == 1, (command, world.replies_to(chat, mid))
        assert said[0] not in REFUSALS, (command, said)
    for command, (_, mid) in asked.items():
        assert catching_up_to(world, chat, [mid]) <= 1, command
    assert world.errors == []


async def test_a_long_outage_tells_each_member_once(world: World, proxy: TcpProxy) -> None:
    """A member whose updates an outage holds is told once, however many they send and
    however long it lasts (it outlasts the pauses between tries)."""
    chat = world.new_group()
    await start_round(world, chat)
    sent: list[int] = []
    stopped = await outage(proxy, 2 * OUTAGE_S)
    for _ in range(3):
        sent.append(world.standin.send_text(chat, ALICE, "/stats"))
        await asyncio.sleep(OUTAGE_S / 2)
    await stopped
    await world.settle()
    assert catching_up_to(world, chat, sent) == 1
    # Over: the flag runs out a while after the last try the outage held, and the next
    # outage tells them again.
    flag = Keys(world.settings.queue).catching_up(chat, ALICE)
    assert 0 < await world.redis.ttl(flag) <= CATCHING_UP_S
    assert world.errors == []


async def test_a_tap_held_by_an_outage_is_told_in_its_toast(world: World, proxy: TcpProxy) -> None:
    chat = world.new_group()
    rnd = await start_round(world, chat)
    world.app.bot_data.drafts.rate = TapRate(most=1000, window_ms=1000)
    markup = taps.keyboard(rnd.id, rnd.palette_emojis)
    sent = await world.app.bot.send_message(
        chat, "🎯", reply_markup=InlineKeyboardMarkup.de_json(json.loads(markup), None)
    )
    data = json.loads(markup)["inline_keyboard"][0][0]["callback_data"]
    # Its room's card gone from Redis: the tap must read Postgres, which is away.
    await world.app.bot_data.cards.shared.drop((await room_of(world, chat)).id)
    stopped = await outage(proxy, 4.0)
    qid = world.standin.press_button(chat, sent.message_id, ALICE, data)

    async def toast() -> dict[str, Any] | None:
        return next(
            (a for a in world.standin.callback_answers if a["callback_query_id"] == qid), None
        )

    found = await eventually(toast, timeout=10, what="the tap's toast")
    assert found is not None and found["text"] == texts.catching_up(EN)
    await stopped
    await world.settle()
    assert world.errors == []


async def test_two_processes_tell_a_member_once(
    world: World, proxy: TcpProxy, bot_queue: str
) -> None:
    """Two bot processes (each its own application, door and answers; the same Redis), each
    holding an update of the same member through the outage, as two webhook processes
    behind a balancer do: one "catching up" between them."""
    other = build_application(
        world.settings.bot(),
        lanes=world.lanes,
        sessionmaker=world.sessionmaker,
        redis=world.redis,
        parts=BotParts(
            pacer=Pacer(world.redis, bot_queue, UNPACED),
            budget=AnswerBudget(world.redis, bot_queue, budget=BUDGET),
        ),
    )
    chat = world.new_group()
    await start_round(world, chat)
    await other.initialize()
    try:
        door = make_door(other, webhook=True)  # a webhook process's door, fed by hand
        stopped = await outage(proxy)
        first = world.standin.send_text(chat, ALICE, "/stats")
        mid = 1_000_000 + int(time.time()) % 1_000_000
        raw = {
            "update_id": 900_000_000 + mid,
            "message": {
                "message_id": mid,
                "date": int(time.time()),
                "chat": {"id": chat, "type": "supergroup", "title": f"room {chat}"},
                "from": {"id": ALICE, "is_bot": False, "first_name": "Alice",
                         "language_code": "en"},
                "text": "/top",
                "entities": [{"type": "bot_command", "offset": 0, "length": 4}],
            },
        }  # fmt: skip
        door.take(Update.de_json(raw, other.bot), raw)
        await stopped
        await asyncio.wait_for(door.wait_idle(), 30)
        await world.settle()
        await asyncio.wait_for(other.bot_data.answers.wait_idle(), 30)
    finally:
        await other.shutdown()
    told = [m for m in world.said(chat) if m.text == texts.catching_up(EN)]
    assert len(told) == 1, told
    # To the first process's /stats, or to the second's /top (typed nowhere the stand-in
    # knows, so posted as no reply).
    assert told[0].reply_to_message_id in (first, None)
    assert world.errors == []
    OUTAGES.ok("postgres")
