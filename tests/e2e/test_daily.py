"""The daily code end to end: the real bot and the real worker around the Bot API stand-in
(inline mode on), the real Redis and Postgres, and a clock the tests move (the bot's and the
worker's; it starts at the real one).

A daily is played in each player's private chat through the front door (the private chat's
card in Redis, the player's lane, the worker's scoring, the results posted through the pace):
typed, tapped, two players with the same puzzle, the card's rows matching the attempts, the
streak carried over midnight UTC, the group board and /top daily, the inline answer, and the
bad input (a guess before /daily and after finishing, /daily in a channel).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select

from codemojex import usecases
from codemojex.bot.daily import INLINE_CACHE_S, INLINE_CARD_CACHE_S
from codemojex.bot.inline import InlineRate
from codemojex.db import Guess, store
from codemojex.game import daily, texts
from codemojex.locale import EN
from codemojex.scoring import feedback
from codemojex.standin import SentMessage
from codemojex.state.keys import Keys
from codemojex.values.clock import utcnow
from tests.e2e.conftest import open_stack
from tests.e2e.harness import ALICE, BOB, CAROL, DAVE, Stack, in_process_worker, result_text
from tests.helpers.dailies import daily_round
from tests.helpers.support import wrong_guess

BOT = "codemojex_bot"
CHANNEL = -1007770002


class Clock:
    """The bot's now: the real one when the test starts, then where the test moves it."""

    def __init__(self) -> None:
        self.now = utcnow()

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
async def clock() -> Clock:
    return Clock()


@pytest.fixture
async def stack(e2e_database_url: str, queue_name: str, clock: Clock) -> AsyncIterator[Stack]:
    async with open_stack(e2e_database_url, queue_name, clock=clock, inline_mode=True) as value:
        yield value
        assert value.errors == [], f"the bot's handlers failed: {value.errors!r}"


async def said_to(stack: Stack, user: int, text: str) -> list[str]:
    """Everything the bot answers `user` in their private chat to `text` (settled)."""
    before = len(stack.said(user))
    stack.standin.send_private(user, text)
    await stack.settle()
    return [m.text for m in stack.said(user)[before:]]


async def open_daily(stack: Stack, user: int, number: int) -> tuple[SentMessage, tuple[str, ...]]:
    """/daily in the user's private chat: the puzzle the worker posts, and its palette as the
    player reads it."""
    stack.standin.send_private(user, "/daily")
    head = f"📅 Daily #{number}:"
    post = await stack.standin.wait_for_sent(
        lambda m: any(line.startswith(head) for line in m.text.splitlines()), 15, chat_id=user
    )
    (line,) = [ln for ln in post.text.splitlines() if ln.startswith("Palette: ")]
    return post, tuple(line.removeprefix("Palette: ").split(" "))


async def card_of(stack: Stack, user: int, number: int) -> SentMessage:
    """The post of the user's finish: the cracked (or missed) line, the card, the next code."""
    return await stack.standin.wait_for_sent(
        lambda m: f"\nCodemojex daily #{number} " in m.text, 15, chat_id=user
    )


def expected_card(
    number: int, guesses: list[tuple[str, ...]], secret: tuple[str, ...], streak: int
) -> str:
    rows = [(fb.exact, fb.misplaced) for fb in (feedback(g, secret) for g in guesses)]
    cracked = guesses[-1] == secret
    return daily.card(
        EN, number, rows, length=len(secret), max_attempts=8, cracked=cracked, streak=streak
    )


def share_button(stack: Stack, chat_id: int, message_id: int) -> Any:
    message = stack.standin.message(chat_id, message_id)
    assert message is not None
    [[button]] = message["reply_markup"]["inline_keyboard"]
    return button


async def type_guesses(
    stack: Stack, user: int, name: str, guesses: list[tuple[str, ...]], secret: tuple[str, ...]
) -> None:
    """The user types each guess in their private chat and reads its result there."""
    for n, guess in enumerate(guesses, 1):
        mid = stack.standin.send_private(user, "".join(guess))
        found = await stack.result(user, mid, name, "".join(guess))
        assert result_text(guess, secret, n) in found.text


async def tap_guess(stack: Stack, user: int, puzzle: SentMessage, guess: tuple[str, ...]) -> str:
    """The user taps `guess` on the puzzle's keyboard: the last tap's toast."""
    buttons = dict(stack.buttons(user, puzzle.message_id))
    toast = None
    for emoji in guess:
        toast = await stack.tap(user, puzzle.message_id, user, buttons[emoji])
    assert toast is not None
    return toast


async def test_a_daily_played_typed_and_tapped_the_same_puzzle_for_two_players(
    stack: Stack, clock: Clock
) -> None:
    async with in_process_worker(stack):
        _, palette = await open_daily(stack, ALICE, 1)
        bobs, bobs_palette = await open_daily(stack, BOB, 1)
        assert bobs_palette == palette  # the same puzzle for everyone
        rnd = await daily_round(stack.sessionmaker, ALICE, clock.now)
        secret = rnd.secret_emojis
        assert (await daily_round(stack.sessionmaker, BOB, clock.now)).secret == rnd.secret
        # Alice types (two misses, then the code): each result comes back in her chat
        alice_tries = [wrong_guess(secret, palette, 0), wrong_guess(secret, palette, 1), secret]
        await type_guesses(stack, ALICE, "Alice", alice_tries, secret)
        card = await card_of(stack, ALICE, 1)
        alices_card = expected_card(1, alice_tries, secret, streak=1)
        assert alices_card in card.text.split("\n\n")
        assert share_button(stack, ALICE, card.message_id)["switch_inline_query"] == "daily"
        # Bob taps a miss, then the code
        bob_tries = [wrong_guess(secret, palette, 2), secret]
        for guess in bob_tries:
            assert await tap_guess(stack, BOB, bobs, guess) == texts.tap_sent(EN, guess)
            await stack.result(BOB, -1, "Bob", "".join(guess))
        bobs_card = await card_of(stack, BOB, 1)
        assert expected_card(1, bob_tries, secret, streak=1) in bobs_card.text.split("\n\n")
        # every guess went through the players' lanes into the database once
        guesses = await stack.all(select(Guess.text))
        assert sorted(guesses) == sorted("".join(g) for g in alice_tries + bob_tries)
        await stack.all_posted()

        # /daily again: the card, the time to the next code and the Share button
        before = len(stack.said(ALICE))
        stack.standin.send_private(ALICE, "/daily")
        await stack.settle()
        [again] = stack.said(ALICE)[before:]
        seconds = daily.seconds_to_next(clock.now)
        assert again.text == texts.daily_again(EN, alices_card, seconds, share_via=BOT)
        assert share_button(stack, ALICE, again.message_id)["switch_inline_query"] == "daily"

        # the inline answer: Alice's card; Carol (not played) gets an invitation, no code
        queries = {user: stack.standin.inline_query(user, "daily") for user in (ALICE, CAROL)}
        await stack.settle()
        [alice_result] = stack.standin.inline_results(queries[ALICE])
        assert alice_result["input_message_content"]["message_text"] == alices_card
        [invite] = stack.standin.inline_results(queries[CAROL])
        invitation = invite["input_message_content"]["message_text"]
        assert invitation == texts.daily_invite(EN, 1, BOT)
        assert not set(palette) & set(invitation)
        # Telegram keeps a card (personal) until the next code at most, an invitation briefly
        kept = {a["user_id"]: a for a in stack.standin.inline_answers}
        assert kept[ALICE]["cache_time"] == min(INLINE_CARD_CACHE_S, seconds)
        assert kept[CAROL]["cache_time"] == INLINE_CACHE_S
        assert kept[ALICE]["is_personal"] and kept[CAROL]["is_personal"]

        # the group board of members who played, and the world's top
        group = stack.new_group(members=[CAROL])
        room = await usecases.ensure_room(
            stack.sessionmaker, group, "G", default_ceiling=2, round_timeout_s=600
        )
        for user, name in ((ALICE, "Alice"), (BOB, "Bob"), (CAROL, "Carol")):
            await usecases.ensure_player(stack.sessionmaker, room.id, user, name)
        asked = stack.standin.send_text(group, CAROL, "/daily")
        board = await stack.reply_to(group, asked)
        lines = board.splitlines()
        assert lines[0] == "📅 Daily #1 in this chat"
        assert lines[1].startswith("🥇 Bob: 2/8 · ") and lines[2].startswith("🥈 Alice: 3/8 · ")
        assert lines[3] == "2 players in the world played it today."
        asked = stack.standin.send_text(group, ALICE, "/top daily")
        top = await stack.reply_to(group, asked)
        assert top.splitlines() == [
            "🌍 Daily #1: the best in the world today",
            "🥇 Bob: 2/8",
            "🥈 Alice: 3/8",
            "You: place 2 of 2 who cracked it.",
        ]
        assert await stack.open_round(group) is None  # nothing started in the group


async def test_a_groups_board_has_the_asker_and_whoever_the_bot_saw_there(
    stack: Stack, clock: Clock
) -> None:
    """Two members play the daily in their private chats; Bob, who never played a round in
    the group nor wrote there, asks /daily in it: he is on its board, and so is Alice, whom
    the bot saw there once (a command). Carol played too, never seen there: not on it."""
    group = stack.new_group()
    seen = stack.standin.send_text(group, ALICE, "/rules")
    await stack.reply_to(group, seen)
    async with in_process_worker(stack):
        tries = {ALICE: 2, BOB: 1, CAROL: 3}
        for user, name in ((ALICE, "Alice"), (BOB, "Bob"), (CAROL, "Carol")):
            _, palette = await open_daily(stack, user, 1)
            secret = (await daily_round(stack.sessionmaker, user, clock.now)).secret_emojis
            guesses = [wrong_guess(secret, palette, n) for n in range(tries[user] - 1)]
            await type_guesses(stack, user, name, [*guesses, secret], secret)
            await card_of(stack, user, 1)
        asked = stack.standin.send_text(group, BOB, "/daily")
        lines = (await stack.reply_to(group, asked)).splitlines()
    assert lines[0] == "📅 Daily #1 in this chat"
    assert lines[1].startswith("🥇 Bob: 1/8 · ") and lines[2].startswith("🥈 Alice: 2/8 · ")
    assert lines[3:] == ["3 players in the world played it today."]
    assert await stack.open_round(group) is None  # nothing started in the group


async def test_bad_input_gets_one_answer_each_and_changes_nothing(
    stack: Stack, clock: Clock
) -> None:
    async with in_process_worker(stack):
        _, palette = await open_daily(stack, ALICE, 1)
        rnd = await daily_round(stack.sessionmaker, ALICE, clock.now)
        secret = rnd.secret_emojis
        # Dave has not sent /daily: one answer, nothing taken
        guess = "".join(wrong_guess(secret, palette, 0))
        assert await said_to(stack, DAVE, guess) == [texts.daily_send_first(EN)]
        assert await said_to(stack, DAVE, f"/g {guess}") == [texts.daily_send_first(EN)]
        # words in a private chat are no guess: the hint
        assert await said_to(stack, DAVE, "hello") == [texts.private_hint(EN)]
        async with stack.sessionmaker() as session:
            assert await store.room_by_chat(session, DAVE) is None  # nothing was created
        # Alice: an invalid guess gets its reason, then she cracks it by /g
        [invalid] = await said_to(stack, ALICE, "/g " + secret[0])
        assert invalid == "Too short: 1 emoji, this round needs 4."
        mid = stack.standin.send_private(ALICE, "/g " + "".join(secret))
        await stack.result(ALICE, mid, "Alice", "".join(secret))
        await card_of(stack, ALICE, 1)
        await stack.all_posted()
        assert await stack.guess_count() == 1
        # after finishing: come back tomorrow, once per guess
        come_back = texts.daily_come_back(EN, daily.seconds_to_next(clock.now))
        assert await said_to(stack, ALICE, "".join(secret)) == [come_back]
        await stack.settle()
        assert await stack.guess_count() == 1
        # /daily in a channel: where it is played, said once
        stack.standin.add_channel(CHANNEL, "News")
        stack.standin.post_in_channel(CHANNEL, "/daily")
        await stack.settle()
        assert [m.text for m in stack.said(CHANNEL)] == [texts.daily_in_channel(EN, BOT)]
        # Bob opened his daily, and midnight UTC passed before he guessed: a new code is out
        _, bobs_palette = await open_daily(stack, BOB, 1)
        clock.now = daily.next_code_at(clock.now) + timedelta(seconds=5)
        guess = "".join(wrong_guess(secret, bobs_palette, 0))
        assert await said_to(stack, BOB, guess) == [texts.daily_send_first(EN)]
        assert await stack.guess_count() == 1


async def test_a_streak_is_carried_over_midnight_utc(stack: Stack, clock: Clock) -> None:
    async with in_process_worker(stack):
        await open_daily(stack, ALICE, 1)
        first = await daily_round(stack.sessionmaker, ALICE, clock.now)
        await type_guesses(stack, ALICE, "Alice", [first.secret_emojis], first.secret_emojis)
        card = await card_of(stack, ALICE, 1)
        cracked = expected_card(1, [first.secret_emojis], first.secret_emojis, streak=1)
        assert cracked in card.text.split("\n\n")
        # a minute past the next midnight: a new code, and the streak goes on
        clock.now = daily.next_code_at(clock.now) + timedelta(minutes=1)
        _, palette2 = await open_daily(stack, ALICE, 2)
        second = await daily_round(stack.sessionmaker, ALICE, clock.now)
        assert second.id != first.id and palette2 == second.palette_emojis
        tries = [wrong_guess(second.secret_emojis, palette2, 0), second.secret_emojis]
        await type_guesses(stack, ALICE, "Alice", tries, second.secret_emojis)
        card2 = await card_of(stack, ALICE, 2)
        assert expected_card(2, tries, second.secret_emojis, 2) in card2.text.split("\n\n")
        await stack.all_posted()
        [me] = await said_to(stack, ALICE, "/me")
        histogram = (1, 1, 0, 0, 0, 0, 0, 0, 0)
        assert me.endswith(texts.daily_record(EN, 2, 2, 2, 2, histogram))


async def test_a_flood_of_inline_queries_is_answered_up_to_the_rate(stack: Stack) -> None:
    # A rate a slow test machine cannot slip under: 3 a minute.
    stack.app.bot_data.inline.rate = InlineRate(most=3, window_ms=60_000)
    flood = [stack.standin.inline_query(ALICE, "daily") for _ in range(8)]
    bobs = stack.standin.inline_query(BOB, "daily")
    await stack.settle()
    answered = {a["inline_query_id"] for a in stack.standin.inline_answers}
    assert len(answered & set(flood)) == 3  # the rest ignored: Telegram shows them nothing
    assert bobs in answered  # each user has a rate of their own
    for query in answered:
        [invite] = stack.standin.inline_results(query)
        assert invite["input_message_content"]["message_text"] == texts.daily_invite(EN, 1, BOT)
    # Still flooding: still ignored. The count goes with its window; then she is answered again.
    late = stack.standin.inline_query(ALICE, "daily")
    await stack.settle()
    assert not stack.standin.inline_results(late)
    key = Keys(stack.settings.queue).inline_rate(ALICE)
    assert 0 < await stack.redis.pttl(key) <= 60_000
    await stack.redis.delete(key)  # the window ends
    again = stack.standin.inline_query(ALICE, "daily")
    await stack.settle()
    assert len(stack.standin.inline_results(again)) == 1
