"""Budget before work: a command pays its answer from its sender's budget in the chat before
it reads anything, so one past the budget costs a Redis call and no SQL. Through the real bot
on the stand-in, counting the statements the bot's own engine runs."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from codemojex.game import texts
from codemojex.locale import EN
from codemojex.state.budget import AnswerBudget
from tests.bot.conftest import ALICE, BOB, E2E, World
from tests.helpers.sql import statements

pytestmark = E2E

BUDGET = 4
IN_GROUP = ["/top", "/top week", "/top daily", "/me", "/daily", "/rules", "/stats", "/help",
            "/newgame", "/nosuch@codemojex_bot"]  # fmt: skip
IN_PRIVATE = ["/daily", "/me", "/top daily", "/rules", "/help", "/stats", "/nosuch"]


@pytest.fixture
def slow_budget(world: World) -> Iterator[World]:
    """The world with a budget of 4 that takes an hour to come back (no answer returns while
    the test runs, however loaded the machine)."""
    answers = world.app.bot_data.answers
    before = answers.budget
    answers.budget = AnswerBudget(world.redis, world.settings.queue, budget=BUDGET, window_s=3600)
    yield world
    answers.budget = before


async def test_commands_past_the_budget_do_no_sql(slow_budget: World) -> None:
    world = slow_budget
    chat = world.new_group()
    # Alice's answers in the group: each read the database
    with statements(world.engine) as sql:
        paid = [world.standin.send_text(chat, ALICE, "/stats") for _ in range(BUDGET)]
        await world.settle()
    assert all(world.replies_to(chat, mid) for mid in paid)
    assert sql != []
    # Past her budget: told once to slow down, then nothing, and not one statement
    with statements(world.engine) as sql:
        past = [world.standin.send_text(chat, ALICE, command) for command in IN_GROUP]
        await world.settle()
    assert sql == []
    assert [text for mid in past for text in world.replies_to(chat, mid)] == [
        texts.answers_spent(EN)
    ]
    # Bob's budget is his own: he is answered, from the database
    with statements(world.engine) as sql:
        bobs = world.standin.send_text(chat, BOB, "/top")
        await world.settle()
    assert world.replies_to(chat, bobs) == [texts.leaderboard(EN, [])]
    assert sql != []


async def test_commands_past_the_budget_in_a_private_chat_do_no_sql(slow_budget: World) -> None:
    world = slow_budget
    for _ in range(BUDGET):
        world.standin.send_private(ALICE, "/me")
    await world.settle()
    before = len(world.said(ALICE))
    with statements(world.engine) as sql:
        for command in IN_PRIVATE:
            world.standin.send_private(ALICE, command)
        await world.settle()
    assert sql == []
    assert [m.text for m in world.said(ALICE)[before:]] == [texts.answers_spent(EN)]
