"""The bot's own answers take their slots from the pacer the worker's sender uses, so the bot
never breaks Telegram's flood limits (the stand-in enforces them here)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from codemojex.bot.replies import ANSWER_POLICY
from codemojex.game import texts
from codemojex.locale import EN
from codemojex.posting.pacer import Pacer
from tests.bot.conftest import (
    ALICE,
    BOB,
    CAROL,
    DAVE,
    E2E,
    MAX_DEPTH,
    World,
    seed_round,
    valid_guess,
)

pytestmark = E2E


@pytest.fixture
def paced(world: World) -> Iterator[World]:
    services = world.app.bot_data
    before = (services.pacer, services.reply_wait_s)
    services.pacer = Pacer(world.redis, world.lanes.queue, ANSWER_POLICY)  # as in production
    services.reply_wait_s = 1.0
    world.standin.enforce_rate_limits()
    yield world
    world.standin.disable_rate_limits()
    services.pacer, services.reply_wait_s = before


async def test_answers_keep_the_group_pace_and_excess_ones_are_dropped(paced: World) -> None:
    world = paced
    chat = world.new_group()
    violations = world.standin.rate_violations
    for user in (ALICE, BOB, CAROL, DAVE, ALICE, BOB):
        world.standin.send_text(chat, user, "/g nope")  # each one deserves an answer
    await world.settle()
    said = world.said(chat)
    assert world.standin.rate_violations == violations
    # 1 a second in a group: within ~1 s of waiting only a couple get through.
    assert 1 <= len(said) < 6


async def test_a_notice_that_could_not_be_sent_is_not_spent(paced: World) -> None:
    world = paced
    services = world.app.bot_data
    services.reply_wait_s = 0.3
    chat = world.new_group()
    _, rnd = await seed_round(world, chat)
    for i in range(MAX_DEPTH):
        world.standin.send_text(chat, ALICE, valid_guess(rnd, i))
    await world.settle()
    assert world.said(chat) == []

    await services.pacer.block_chat(chat, 2000)  # as after a RetryAfter: nobody posts there
    dropped = world.standin.send_text(chat, ALICE, valid_guess(rnd))
    await world.settle()
    assert world.replies_to(chat, dropped) == []

    await asyncio.sleep(await services.pacer.wait_ms(chat) / 1000)  # the block is over
    told = world.standin.send_text(chat, ALICE, valid_guess(rnd))
    again = world.standin.send_text(chat, ALICE, valid_guess(rnd))
    await world.settle()
    assert world.replies_to(chat, told) == [texts.slow_down(EN)]
    assert world.replies_to(chat, again) == []
    assert await world.queued() == MAX_DEPTH
