"""The daily code at midnight UTC, end to end (the real bot and worker around the Bot API
stand-in, the real Redis and Postgres) on a clock the test moves, the bot's and the worker's:

- a crack sent at 23:59:59.5 and still in the lanes when the player's /daily at 00:00:01 opens
  the next day (closing the day before's round) counts for its day: the card, the streak, the
  record and the day's world board as if it had been scored before midnight;
- a lost daily does not show its code while its day runs (a second account could lose on
  purpose and read it): the card says when it will be shown, and the next day's /daily shows it;
  the world board and /top daily are as before.

The lanes stamp a guess with Redis's clock (the real one) and the test's clock runs a day ahead
of it, so a guess the bot takes is before the midnight of the day it is played on.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from sqlalchemy import select

from codemojex.db import DailyResult, Round
from codemojex.game import daily, texts
from codemojex.locale import EN
from codemojex.state.board import DailyBoard
from codemojex.values.types import SOLVED
from tests.e2e.conftest import open_stack
from tests.e2e.harness import ALICE, BOB, Stack, in_process_worker, result_text
from tests.e2e.test_daily import Clock, card_of, expected_card, open_daily, said_to, type_guesses
from tests.helpers.dailies import daily_round, misses
from tests.helpers.support import wrong_guess


@pytest.fixture
async def clock() -> Clock:
    ahead = Clock()
    ahead.now += timedelta(days=1)  # every deadline at least a day past the lanes' clock
    return ahead


@pytest.fixture
async def stack(e2e_database_url: str, queue_name: str, clock: Clock) -> AsyncIterator[Stack]:
    async with open_stack(e2e_database_url, queue_name, clock=clock, inline_mode=True) as value:
        yield value
        assert value.errors == [], f"the bot's handlers failed: {value.errors!r}"


async def test_a_crack_sent_before_midnight_counts_when_the_next_daily_closed_its_day(
    stack: Stack, clock: Clock
) -> None:
    async with in_process_worker(stack):
        # day 1: cracked (a streak of 1)
        await open_daily(stack, ALICE, 1)
        first = await daily_round(stack.sessionmaker, ALICE, clock.now)
        await type_guesses(stack, ALICE, "Alice", [first.secret_emojis], first.secret_emojis)
        await card_of(stack, ALICE, 1)
        # day 2, noon: a miss
        clock.now = daily.next_code_at(clock.now) + timedelta(hours=12)
        _, palette = await open_daily(stack, ALICE, 2)
        second = await daily_round(stack.sessionmaker, ALICE, clock.now)
        secret = second.secret_emojis
        miss = wrong_guess(secret, palette, 0)
        await type_guesses(stack, ALICE, "Alice", [miss], secret)
        await stack.all_posted()
    day2 = daily.day_of(clock.now)
    midnight = daily.next_code_at(clock.now)

    # 23:59:59.5: the crack is taken (the workers are behind: it waits in her lane)
    clock.now = midnight - timedelta(milliseconds=500)
    crack = stack.standin.send_private(ALICE, "".join(secret))
    await stack.settle()
    room = await stack.room_id(ALICE)
    assert len(await stack.pending_job_ids(room)) == 1
    # 00:00:01: /daily opens day 3, closing day 2's round at once
    clock.now = midnight + timedelta(seconds=1)
    stack.standin.send_private(ALICE, "/daily")
    await stack.settle()
    async with stack.sessionmaker() as session:
        closed = await session.get(Round, second.id, populate_existing=True)
        await session.commit()
    assert closed is not None and closed.ended_at is not None

    async with in_process_worker(stack):
        result = await stack.result(ALICE, crack, "Alice", "".join(secret))
        assert result_text(secret, secret, 2) in result.text  # not "too late"
        card = await card_of(stack, ALICE, 2)
        assert expected_card(2, [miss, secret], secret, streak=2) in card.text.split("\n\n")
        assert texts.daily_new_code_out(EN) in card.text  # the next code is out already
        await open_daily(stack, ALICE, 3)  # the puzzle /daily queued, posted
        await stack.all_posted()
        # the record as if scored before midnight: her streak goes on today
        [me] = await said_to(stack, ALICE, "/me")
        assert me.endswith(texts.daily_record(EN, 2, 2, 2, 2, (1, 1, 0, 0, 0, 0, 0, 0, 0)))
    async with stack.sessionmaker() as session:
        row = await session.get(DailyResult, (day2, ALICE))
        rnd = await session.get(Round, second.id, populate_existing=True)
        await session.commit()
    assert row is not None and row.cracked and row.finished_at is not None
    assert row.finished_at < midnight  # the time it was taken
    assert rnd is not None and rnd.end_reason == SOLVED
    # on its day's world board, not today's
    board = DailyBoard(stack.redis, stack.settings.queue)
    assert await board.top(day2, 10) == [(ALICE, 2)]
    assert await board.top(daily.day_of(clock.now), 10) == []


async def test_a_lost_dailys_code_is_shown_when_its_day_ends(stack: Stack, clock: Clock) -> None:
    async with in_process_worker(stack):
        await open_daily(stack, BOB, 1)
        await open_daily(stack, ALICE, 1)
        rnd = await daily_round(stack.sessionmaker, BOB, clock.now)
        secret = rnd.secret_emojis
        tries = misses(rnd, 8)
        await type_guesses(stack, BOB, "Bob", tries, secret)
        card = await card_of(stack, BOB, 1)
        # no emoji of the code anywhere in the card's post, but when it is shown
        assert not set(rnd.palette_emojis) & set(card.text)
        seconds = daily.seconds_to_next(clock.now)
        assert card.text.startswith(texts.daily_missed(EN, seconds))
        assert expected_card(1, tries, secret, streak=0) in card.text.split("\n\n")
        # nor when he asks again
        [again] = await said_to(stack, BOB, "/daily")
        assert not set(rnd.palette_emojis) & set(again)
        # the world board as before: Alice, who cracked it, in the top; Bob's place
        await type_guesses(stack, ALICE, "Alice", [secret], secret)
        await card_of(stack, ALICE, 1)
        await stack.all_posted()
        [top] = await said_to(stack, BOB, "/top daily")
        assert top.splitlines() == [
            "🌍 Daily #1: the best in the world today",
            "🥇 Alice: 1/8",
            texts.daily_rank_missed(EN),
        ]

        # the next day: Bob's /daily shows yesterday's code above the new puzzle; Alice's not
        clock.now = daily.next_code_at(clock.now) + timedelta(minutes=1)
        bobs, _ = await open_daily(stack, BOB, 2)
        assert bobs.text.startswith(texts.daily_yesterday(EN, 1, secret) + "\n\n📅 Daily #2:")
        alices, _ = await open_daily(stack, ALICE, 2)
        assert alices.text.startswith("📅 Daily #2:")
        [top] = await said_to(stack, BOB, "/top daily")
        assert top.splitlines()[0] == "Nobody has cracked Daily #2 yet."
        await stack.all_posted()
    async with stack.sessionmaker() as session:
        lost = await session.scalar(
            select(DailyResult.cracked).where(DailyResult.tg_user_id == BOB)
        )
        await session.commit()
    assert lost is False
