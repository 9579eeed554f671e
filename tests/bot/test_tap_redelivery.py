"""A tap is marked seen only with its effect (bot/drafts.py `Drafts.done`): a tap whose handler
failed half-way (here: its room's card gone from Redis and Postgres unreachable, so the card
cannot be read after the tap was counted) takes effect when it is handled again (the door
tries it again once Postgres is back; Telegram would deliver it again after a kill), instead
of being taken for one already handled. The tap that completes a code is one guess
however often it is delivered: its job id is derived from the callback query.

The bot reaches Postgres through a proxy this test cuts (the machine's Postgres is never
touched), as tests/bot/test_postgres_away.py does."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from telegram import InlineKeyboardMarkup

from codemojex.bot.drafts import TapRate
from codemojex.db import Round
from codemojex.game import taps, texts
from codemojex.locale import EN
from codemojex.outages import OUTAGES
from codemojex.state.keys import Keys
from codemojex.values import ids
from codemojex.values.jobs import GuessJob
from tests.bot.conftest import (
    ALICE,
    MAX_DEPTH,
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


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(bot_database_url: str, bot_queue: str, proxy: TcpProxy) -> AsyncIterator[World]:
    async with bot_world(through(bot_database_url, proxy), bot_queue) as world:
        # Taps as fast as a test sends them, never "too fast".
        world.app.bot_data.drafts.rate = TapRate(most=1000, window_ms=1000)
        await wipe_tables(world.engine, restart_ids=False)
        await drop_keys(world.redis, bot_queue)
        yield world


async def tap(
    world: World, chat: int, message_id: int, data: str, query_id: str | None = None
) -> tuple[str, str | None]:
    """Alice taps a button under the bot's message: (the query's id, the toast she got)."""
    before = len(world.standin.callback_answers)
    qid = world.standin.press_button(chat, message_id, ALICE, data, query_id=query_id)

    async def answered() -> dict[str, Any] | None:
        answers = world.standin.callback_answers[before:]
        return next((a for a in answers if a["callback_query_id"] == qid), None)

    found = await eventually(answered, timeout=15, what=f"the answer to tap {data}")
    assert found is not None
    return qid, found["text"]


async def waiting_tap(world: World, proxy: TcpProxy, chat: int, message_id: int, data: str) -> str:
    """A tap handled while its room's card is gone from Redis and Postgres is away: counted
    against the tap rate, then failed reading the card, an outage the door waits out. Postgres
    is let back once that first try failed; the query's id."""
    room = await room_of(world, chat)
    await world.app.bot_data.cards.shared.drop(room.id)
    before = len(world.standin.callback_answers)
    await proxy.stop()
    try:
        qid = world.standin.press_button(chat, message_id, ALICE, data)
        await eventually(
            lambda: _true(OUTAGES.is_open("postgres")), timeout=15, what="the tap's failed try"
        )
        assert len(world.standin.callback_answers) == before  # not answered: it waits
    finally:
        await proxy.start()
    return qid


async def _true(value: bool) -> bool:
    return value


async def answer_to(world: World, qid: str) -> str | None:
    """The toast the tap `qid` got, once it got one."""

    async def answered() -> dict[str, Any] | None:
        return next(
            (a for a in world.standin.callback_answers if a["callback_query_id"] == qid), None
        )

    found = await eventually(answered, timeout=20, what=f"the answer to tap {qid}")
    assert found is not None
    text: str | None = found["text"]
    return text


async def announcement(world: World, chat: int, rnd: Round) -> tuple[int, list[tuple[str, str]]]:
    """The round's keyboard posted under a message of the bot's, as the worker's sender posts
    the announcement (this world runs no worker): its message id and its buttons."""
    markup = taps.keyboard(rnd.id, rnd.palette_emojis)
    sent = await world.app.bot.send_message(
        chat, "🎯", reply_markup=InlineKeyboardMarkup.de_json(json.loads(markup), None)
    )
    rows = json.loads(markup)["inline_keyboard"]
    return sent.message_id, [(b["text"], b["callback_data"]) for row in rows for b in row]


def data_of(buttons: list[tuple[str, str]], text: str) -> str:
    return next(data for label, data in buttons if label == text)


async def test_a_tap_whose_handler_failed_takes_effect_when_delivered_again(
    world: World, proxy: TcpProxy
) -> None:
    chat = world.new_group()
    rnd = await start_round(world, chat)
    palette = rnd.palette_emojis
    key = Keys(world.settings.queue).tap_draft(rnd.id, ALICE)
    ann, buttons = await announcement(world, chat, rnd)

    # A draft step whose first try failed: tried again, it is a step, not a no-op.
    qid = await waiting_tap(world, proxy, chat, ann, data_of(buttons, palette[0]))
    toast = await answer_to(world, qid)
    assert toast == palette[0] + "···"
    # Taken now: delivered once more, it changes nothing.
    assert (await tap(world, chat, ann, data_of(buttons, palette[0]), query_id=qid))[1] is None
    guess = palette[: rnd.length]
    for emoji in guess[1:-1]:
        await tap(world, chat, ann, data_of(buttons, emoji))

    # The tap that completes the code, whose first try failed: tried again, the guess.
    before = await world.queued()
    last = await waiting_tap(world, proxy, chat, ann, data_of(buttons, guess[-1]))
    assert await answer_to(world, last) == texts.tap_sent(EN, list(guess))
    assert await world.queued() == before + 1
    job = ids.derived(ids.JOB, f"cb:{last}")
    assert await world.redis.exists(world.lanes.keys.job(job)) == 1
    assert await world.redis.exists(key) == 0
    assert world.errors == []


async def test_a_completing_tap_delivered_again_before_its_mark_is_one_guess(
    world: World,
) -> None:
    """A process that died after the guess was admitted but before the tap's mark (and the
    draft's clearing): the tap delivered again is admitted again, a duplicate of its derived
    job id, so the lane holds one guess."""
    chat = world.new_group()
    rnd = await start_round(world, chat)
    palette = rnd.palette_emojis
    keys = Keys(world.settings.queue)
    ann, buttons = await announcement(world, chat, rnd)
    guess = palette[: rnd.length]
    for emoji in guess[:-1]:
        await tap(world, chat, ann, data_of(buttons, emoji))
    before = await world.queued()
    qid, toast = await tap(world, chat, ann, data_of(buttons, guess[-1]))
    assert toast == texts.tap_sent(EN, list(guess))
    assert await world.queued() == before + 1
    # As the process that died left it: the draft complete but for the last tap, no mark.
    await world.redis.delete(keys.tap_seen(qid))
    draft = taps.draft_text(range(rnd.length - 1))
    await world.redis.set(keys.tap_draft(rnd.id, ALICE), draft, ex=600)
    _, toast = await tap(world, chat, ann, data_of(buttons, guess[-1]), query_id=qid)
    assert toast == texts.tap_sent(EN, list(guess))
    assert await world.queued() == before + 1  # the same job: one guess
    assert await world.redis.exists(keys.tap_draft(rnd.id, ALICE)) == 0
    assert await world.redis.exists(keys.tap_seen(qid)) == 1
    assert world.errors == []


async def test_a_completing_tap_refused_then_delivered_again_takes_effect(
    world: World,
) -> None:
    """The tap that completes a code, refused because the player's lane is full ("slow
    down"): neither marked seen nor its draft cleared, so delivered again once the lane has
    room (Telegram sends it again after a kill; the door tries a failed one again), it is
    the guess, and only then is the draft cleared."""
    chat = world.new_group()
    rnd = await start_round(world, chat)
    palette = rnd.palette_emojis
    keys = Keys(world.settings.queue)
    ann, buttons = await announcement(world, chat, rnd)
    guess = palette[: rnd.length]
    typed = [world.standin.send_text(chat, ALICE, "".join(palette[i % len(palette)]
             for i in range(n, n + rnd.length))) for n in range(1, MAX_DEPTH + 1)]  # fmt: skip
    await world.settle()
    assert all(world.replies_to(chat, mid) == [] for mid in typed)  # the lane is full now
    for emoji in guess[:-1]:
        await tap(world, chat, ann, data_of(buttons, emoji))
    before = await world.queued()
    qid, toast = await tap(world, chat, ann, data_of(buttons, guess[-1]))
    assert toast == texts.slow_down(EN)
    assert await world.queued() == before
    assert await world.redis.exists(keys.tap_seen(qid)) == 0
    assert (
        await world.redis.get(keys.tap_draft(rnd.id, ALICE))
        == taps.draft_text([palette.index(e) for e in guess[:-1]]).encode()
    )
    # Room in the lane again (a worker took one of hers; the module's other rooms may hold
    # jobs too), and the same tap delivered again.
    while (job := await world.lanes.claim(10_000)) is not None:
        await world.lanes.ack(job)
        if GuessJob.decode(job.payload).round_id == rnd.id:
            break
    before = await world.queued()
    _, toast = await tap(world, chat, ann, data_of(buttons, guess[-1]), query_id=qid)
    assert toast == texts.tap_sent(EN, list(guess))
    assert await world.queued() == before + 1
    assert await world.redis.exists(world.lanes.keys.job(ids.derived(ids.JOB, f"cb:{qid}"))) == 1
    assert await world.redis.exists(keys.tap_draft(rnd.id, ALICE)) == 0
    assert world.errors == []
