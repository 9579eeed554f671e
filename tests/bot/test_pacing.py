"""The bot's own answers take their slots from the pacer the worker's sender uses, so the bot
never breaks Telegram's flood limits (the stand-in enforces them here)."""

from __future__ import annotations

import pytest

from codemojex.worker.pacing import Pacer
from tests.bot.conftest import ALICE, BOB, CAROL, DAVE, E2E, World

pytestmark = E2E


@pytest.fixture
def paced(world: World):
    services = world.app.bot_data
    before = (services.pacer, services.reply_wait_s)
    services.pacer = Pacer(world.redis, world.lanes.queue)  # Telegram's pace
    services.reply_wait_s = 1.5
    world.standin.enforce_rate_limits()
    yield world
    world.standin.disable_rate_limits()
    services.pacer, services.reply_wait_s = before


async def test_answers_keep_the_group_pace_and_excess_ones_are_dropped(paced: World) -> None:
    world = paced
    chat = world.new_group()
    violations = world.standin.rate_violations
    for user in (ALICE, BOB, CAROL, DAVE) * 2:
        world.standin.send_text(chat, user, "/g nope")  # each one deserves an answer
    await world.settle()
    said = world.said(chat)
    assert world.standin.rate_violations == violations
    # 1 a second, 5 per 15 s in a group: within ~1.5 s of waiting only a couple get through.
    assert 1 <= len(said) < 8
