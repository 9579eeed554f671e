"""The daily code through the real bot (python-telegram-bot on the Bot API stand-in, the real
Redis and Postgres), on a clock the tests move over midnight: /daily in a private chat (the
puzzle, once a day), in a group (its members' board) and in a channel, /top daily, /me, and the
inline answer of a card's Share button. The guesses of a daily are recorded here as the worker
records them; played through the bot and the worker: tests/e2e/test_daily.py."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
import pytest_asyncio
from sqlalchemy import func, select
from telegram import Chat
from telegram.constants import ChatType

from codemojex import usecases
from codemojex.db import Outbox, Round, store
from codemojex.game import daily, taps, texts
from codemojex.locale import EN, Lang
from codemojex.scoring import feedback
from codemojex.state.board import DailyBoard
from codemojex.state.cards import card_of
from codemojex.state.keys import Keys
from codemojex.state.members import MEMBERS_TTL_S, GroupMembers
from codemojex.values.daily import Row
from codemojex.values.types import KIND_ROUND, ROUND_DAILY
from tests.bot.conftest import (
    ALICE,
    BOB,
    CAROL,
    DAVE,
    E2E,
    World,
    bot_world,
    open_round,
    through,
)
from tests.helpers import writes
from tests.helpers.dailies import daily_round, misses, play
from tests.ops.proxy import TcpProxy

pytestmark = E2E

BOT = "codemojex_bot"
DAY1 = datetime(2026, 3, 14, tzinfo=UTC)
IVAN = 1010  # a Russian-speaking player
EVE = 1011
CHANNEL = -1007770001


class Clock:
    """The bot's daily clock, moved by the tests."""

    def __init__(self) -> None:
        self.now = DAY1 + timedelta(hours=12)

    def __call__(self) -> datetime:
        return self.now


CLOCK = Clock()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(bot_database_url: str, bot_queue: str) -> AsyncIterator[World]:
    async with bot_world(bot_database_url, bot_queue, clock=CLOCK, inline_mode=True) as world:
        world.standin.add_user(IVAN, "Иван", language_code="ru")
        yield world


@pytest.fixture(autouse=True)
def noon() -> None:
    CLOCK.now = DAY1 + timedelta(hours=12)


async def ask(world: World, user: int, text: str) -> list[str]:
    """What the bot answers `user` in their private chat (there it does not quote)."""
    before = len(world.said(user))
    world.standin.send_private(user, text)
    await world.settle()
    return [m.text for m in world.said(user)[before:]]


async def puzzle_rows(world: World, user: int) -> list[Outbox]:
    async with world.sessionmaker() as session:
        stmt = (
            select(Outbox)
            .where(Outbox.chat_id == user, Outbox.kind == KIND_ROUND)
            .order_by(Outbox.id)
        )
        rows = list((await session.execute(stmt)).scalars())
        await session.commit()
    return rows


async def finish(world: World, user: int, guesses: list[tuple[str, ...]], at: datetime) -> None:
    """The user's guesses recorded as the worker records them, and their finish put on the
    world board as the worker does after the commit."""
    verdicts = await play(world.sessionmaker, user, guesses, at)
    finishes = [v.finish for v in verdicts if v.finish is not None]
    await DailyBoard(world.redis, world.settings.queue).finished(finishes)


def rows_of(guesses: list[tuple[str, ...]], secret: tuple[str, ...]) -> list[Row]:
    """A card's rows: the (exact, misplaced) of each guess."""
    return [(fb.exact, fb.misplaced) for fb in (feedback(g, secret) for g in guesses)]


async def test_daily_in_a_private_chat_posts_the_puzzle_once(world: World) -> None:
    assert await ask(world, ALICE, "/daily") == []  # the puzzle goes through the outbox
    [post] = await puzzle_rows(world, ALICE)
    rnd = await daily_round(world.sessionmaker, ALICE, CLOCK.now)
    palette = rnd.palette_emojis
    assert post.text == texts.daily_puzzle(EN, 1, palette, 4, 8)
    assert post.markup == taps.keyboard(rnd.id, palette)  # the tap keyboard, as a round's
    # again the same day: how Alice stands, never a second puzzle
    assert await ask(world, ALICE, "/daily") == [texts.daily_playing(EN, 1, 8, palette)]
    assert len(await puzzle_rows(world, ALICE)) == 1
    # Bob and Ivan get the same puzzle; Ivan's in his language
    await ask(world, BOB, "/daily")
    await ask(world, IVAN, "/daily")
    [ivans] = await puzzle_rows(world, IVAN)
    assert ivans.text == texts.daily_puzzle(Lang("ru"), 1, palette, 4, 8)
    async with world.sessionmaker() as session:
        secrets = set((await session.execute(select(Round.secret))).scalars())
        await session.commit()
    assert secrets == {rnd.secret}


async def test_daily_writes_the_chats_card_as_its_transaction_left_it(world: World) -> None:
    cards = world.app.bot_data.cards
    await ask(world, ALICE, "/daily")
    read = await cards.shared.read(ALICE, 0, user_id=ALICE)
    async with world.sessionmaker() as session:
        room = await store.room_by_chat(session, ALICE)
        assert room is not None
        stored = await store.room_card(session, room.id)
    assert stored is not None and stored.open_round is not None
    assert read.card == card_of(stored) and read.seat == stored.seats[ALICE]
    # A change of the room that lands between the transaction's read and the card's write
    # (here: a ban, with the card dropped as every change drops it) wins over the older read:
    # the card is read anew.
    chat = Chat(ALICE, ChatType.PRIVATE)
    before = await cards.generation(chat)
    assert before is not None and before.room_id == room.id
    async with world.sessionmaker() as session:
        await writes.ban(world.sessionmaker, room.id, stored.seats[ALICE], actor=None)
    await cards.shared.drop(room.id)
    await cards.write(stored, before)
    assert (await cards.shared.read(ALICE, 0, user_id=ALICE)).banned
    # Nothing moved since the read: the card is written as handed over.
    before = await cards.generation(chat)
    assert before is not None
    await cards.write(stored, before)
    assert not (await cards.shared.read(ALICE, 0, user_id=ALICE)).banned


async def test_daily_again_after_the_finish_shows_the_card_and_the_next_code(
    world: World,
) -> None:
    await ask(world, ALICE, "/daily")
    rnd = await daily_round(world.sessionmaker, ALICE, CLOCK.now)
    tries = [*misses(rnd, 1), rnd.secret_emojis]
    await finish(world, ALICE, tries, CLOCK.now)
    CLOCK.now += timedelta(hours=2, minutes=30)
    card = daily.card(
        EN, 1, rows_of(tries, rnd.secret_emojis), length=4, max_attempts=8, cracked=True, streak=1
    )
    assert await ask(world, ALICE, "/daily") == [
        texts.daily_again(EN, card, 9 * 3600 + 30 * 60, share_via=BOT)
    ]
    assert len(await puzzle_rows(world, ALICE)) == 1


async def test_a_streak_is_carried_over_midnight_and_the_next_day_is_a_new_puzzle(
    world: World,
) -> None:
    CLOCK.now = DAY1 + timedelta(hours=23, minutes=58)
    await ask(world, ALICE, "/daily")
    first = await daily_round(world.sessionmaker, ALICE, CLOCK.now)
    await finish(world, ALICE, [first.secret_emojis], CLOCK.now + timedelta(minutes=1))
    CLOCK.now = DAY1 + timedelta(days=1, minutes=1)
    await ask(world, ALICE, "/daily")
    await ask(world, BOB, "/daily")
    alice, bob = (await puzzle_rows(world, ALICE))[-1], (await puzzle_rows(world, BOB))[-1]
    second = await daily_round(world.sessionmaker, ALICE, CLOCK.now)
    assert alice.text == bob.text == texts.daily_puzzle(EN, 2, second.palette_emojis, 4, 8)
    assert (await daily_round(world.sessionmaker, BOB, CLOCK.now)).secret == second.secret
    assert second.id != first.id
    tries = [*misses(second, 2), second.secret_emojis]
    await finish(world, ALICE, tries, CLOCK.now + timedelta(minutes=3))
    [me] = await ask(world, ALICE, "/me")
    histogram = (1, 0, 1, 0, 0, 0, 0, 0, 0)
    assert me.endswith(texts.daily_record(EN, 2, 2, 2, 2, histogram))
    # two days later the run is over, the best stays
    CLOCK.now += timedelta(days=2)
    [later] = await ask(world, ALICE, "/me")
    assert later.endswith(texts.daily_record(EN, 0, 2, 2, 2, histogram))


async def delivered_late(world: World, user: int, message_id: int, late: timedelta) -> list[str]:
    """The /daily message `message_id` delivered again `late` after it was sent (the bot
    died before confirming it): the bot's clock moves on by `late`, and the message keeps its
    date, as Telegram sends it again. What the bot answers."""
    message = world.standin.message(user, message_id)
    assert message is not None
    CLOCK.now += late
    before = len(world.said(user))
    world.standin.push_raw_update(
        {"message": {**message, "date": int(message["date"] - late.total_seconds())}}
    )
    await world.settle()
    return [m.text for m in world.said(user)[before:]]


async def test_a_daily_sent_before_midnight_and_delivered_after_it_shows_its_own_day(
    world: World,
) -> None:
    """/daily takes its day from the message's date: delivered again after midnight, it opens
    nothing of the next day (no second puzzle, no second round), and says a new code is out."""
    CLOCK.now = DAY1 + timedelta(hours=23, minutes=59)
    asked = world.standin.send_private(ALICE, "/daily")
    await world.settle()
    [puzzle] = await puzzle_rows(world, ALICE)

    said = await delivered_late(world, ALICE, asked, timedelta(minutes=2))
    assert said == [texts.daily_new_code_out(EN)]
    assert [p.id for p in await puzzle_rows(world, ALICE)] == [puzzle.id]
    async with world.sessionmaker() as session:
        rounds = (await session.execute(select(func.count()).select_from(Round))).scalar()
        await session.commit()
    assert rounds == 1
    # Sent now, it is the new day's.
    assert await ask(world, ALICE, "/daily") == []
    assert len(await puzzle_rows(world, ALICE)) == 2


async def test_a_finished_daily_delivered_after_midnight_shows_its_card(world: World) -> None:
    CLOCK.now = DAY1 + timedelta(hours=23, minutes=50)
    asked = world.standin.send_private(ALICE, "/daily")
    await world.settle()
    rnd = await daily_round(world.sessionmaker, ALICE, CLOCK.now)
    await finish(world, ALICE, [rnd.secret_emojis], CLOCK.now + timedelta(minutes=1))
    card = daily.card(EN, 1, [(4, 0)], length=4, max_attempts=8, cracked=True, streak=1)

    said = await delivered_late(world, ALICE, asked, timedelta(minutes=15))
    assert said == [f"{card}\n\n{texts.daily_new_code_out(EN)}"]
    assert len(await puzzle_rows(world, ALICE)) == 1


async def test_a_groups_board_and_the_world_top(world: World) -> None:
    group = world.new_group()
    room = await usecases.ensure_room(
        world.sessionmaker, group, "G", default_ceiling=2, round_timeout_s=600
    )
    for user, name in ((ALICE, "Alice"), (BOB, "Bob"), (CAROL, "Carol")):
        await usecases.ensure_player(world.sessionmaker, room.id, user, name)
    for user in (ALICE, BOB, DAVE):  # Dave plays, but never played in the group
        await ask(world, user, "/daily")
    rnd = await daily_round(world.sessionmaker, ALICE, CLOCK.now)
    await finish(
        world, ALICE, [*misses(rnd, 1), rnd.secret_emojis], CLOCK.now + timedelta(minutes=2)
    )
    await finish(world, BOB, [rnd.secret_emojis], CLOCK.now + timedelta(minutes=5))
    await finish(world, DAVE, [*misses(rnd, 2), rnd.secret_emojis], CLOCK.now)
    asked = world.standin.send_text(group, CAROL, "/daily")
    await world.settle()
    [board] = world.replies_to(group, asked)
    assert board.splitlines() == [
        "📅 Daily #1 in this chat",
        "🥇 Bob: 1/8 · 5 minutes",
        "🥈 Alice: 2/8 · 2 minutes",
        "3 players in the world played it today.",
    ]
    assert await open_round(world, group) is None  # nothing started in the group
    asked = world.standin.send_text(group, ALICE, "/top daily")
    await world.settle()
    [top] = world.replies_to(group, asked)
    assert top.splitlines() == [
        "🌍 Daily #1: the best in the world today",
        "🥇 Bob: 1/8",
        "🥈 Alice: 2/8",
        "🥉 Dave: 3/8",
        "You: place 2 of 3 who cracked it.",
    ]
    [carols] = await ask(world, CAROL, "/top daily")
    assert carols.splitlines()[-1] == texts.daily_rank_none(EN)
    # /top alone in a private chat is still a group's board
    assert await ask(world, CAROL, "/top") == [texts.group_only(EN)]


def seen_group(world: World) -> int:
    """A group the bot administers (Telegram tells it of joins and leaves there)."""
    group = world.new_group()
    world.standin.chats[group].bot_status = "administrator"
    return group


async def board_of(world: World, group: int, asker: int) -> list[str]:
    """`asker`'s /daily in the group: the board's lines."""
    asked = world.standin.send_text(group, asker, "/daily")
    await world.settle()
    [board] = world.replies_to(group, asked)
    return board.splitlines()


async def test_a_groups_members_are_everyone_the_bot_saw_there(world: World) -> None:
    """Its players, and whoever ran a command, tapped or joined there: their dailies make the
    board; the asker always does; a leave takes a member off it; nobody else is on it."""
    world.standin.add_user(EVE, "Eve")
    group = seen_group(world)
    room = await usecases.ensure_room(
        world.sessionmaker, group, "G", default_ceiling=2, round_timeout_s=600
    )
    await usecases.ensure_player(
        world.sessionmaker, room.id, ALICE, "Alice"
    )  # played a round there
    asked = world.standin.send_text(group, BOB, "/rules")  # a command
    await world.settle()
    world.standin.join(group, DAVE)  # a join (the bot administers the group)
    tap = taps.tap_data(1, 0)  # a tap on a keyboard of a round long over
    world.standin.press_button(group, world.said(group)[-1].message_id, IVAN, tap, stale=True)
    await world.settle()
    assert world.replies_to(group, asked) and world.standin.callback_answers
    for user in (ALICE, BOB, CAROL, DAVE, IVAN, EVE):  # Eve was never seen in the group
        await ask(world, user, "/daily")
    rnd = await daily_round(world.sessionmaker, ALICE, CLOCK.now)
    for n, user in enumerate((ALICE, BOB, CAROL, DAVE, IVAN, EVE)):
        await finish(world, user, [*misses(rnd, n), rnd.secret_emojis], CLOCK.now)
    # Carol never played a round here, never spoke here before: she asks, she is on it
    assert await board_of(world, group, CAROL) == [
        "📅 Daily #1 in this chat",
        "🥇 Alice: 1/8 · 0 seconds",
        "🥈 Bob: 2/8 · 0 seconds",
        "🥉 Carol: 3/8 · 0 seconds",
        "· Dave: 4/8 · 0 seconds",
        "· Иван: 5/8 · 0 seconds",
        "6 players in the world played it today.",
    ]
    world.standin.leave(group, DAVE)
    await world.settle()
    assert "· Dave: 4/8 · 0 seconds" not in await board_of(world, group, CAROL)


async def test_a_member_who_only_chats_in_a_group_is_on_its_board(world: World) -> None:
    """Plain chatter (the bot gets it as the group's admin, or with privacy mode off) and a
    sticker make their senders members, noted in memory and written together: many messages
    cost a flush or two, never a round trip each. A guess taken notes nobody (the worker
    writes the guesser's row)."""
    world.standin.add_user(EVE, "Eve")
    group = seen_group(world)
    members = world.app.bot_data.members
    flushes = members.flushes
    began = time.monotonic()
    for n in range(12):
        world.standin.send_text(group, EVE, f"good morning, everyone ({n})")
    world.standin.send_sticker(group, DAVE)
    world.standin.send_text(group, BOB, "🍎🍌")  # no round here: not taken, still said
    await world.settle()
    for user in (BOB, CAROL, DAVE, EVE):
        await ask(world, user, "/daily")
    rnd = await daily_round(world.sessionmaker, BOB, CLOCK.now)
    for n, user in enumerate((BOB, CAROL, DAVE, EVE)):
        await finish(world, user, [*misses(rnd, n), rnd.secret_emojis], CLOCK.now)
    assert await board_of(world, group, CAROL) == [
        "📅 Daily #1 in this chat",
        "🥇 Bob: 1/8 · 0 seconds",
        "🥈 Carol: 2/8 · 0 seconds",
        "🥉 Dave: 3/8 · 0 seconds",
        "· Eve: 4/8 · 0 seconds",
        "4 players in the world played it today.",
    ]
    # Fourteen messages and a command: a flush per `flush_s` at most, and the board's own.
    elapsed = time.monotonic() - began
    assert members.flushes - flushes <= 2 + elapsed / members.flush_s
    key = Keys(world.settings.queue).group_members(group)
    assert 0 < await world.redis.pttl(key) <= MEMBERS_TTL_S * 1000


async def test_the_notes_waiting_in_memory_are_bounded(world: World) -> None:
    """At most `pending_max` notes wait for a flush; past them a new member is dropped and
    counted (one already waiting is noted again at no cost)."""
    world.standin.add_user(EVE, "Eve")
    group = seen_group(world)
    members = world.app.bot_data.members
    await members.flush()
    before = (members.flush_s, members.pending_max, members.dropped)
    members.flush_s, members.pending_max = 60.0, 2  # no flush meanwhile
    try:
        for user in (ALICE, BOB, ALICE, EVE):
            world.standin.send_text(group, user, "hello")
        await world.settle()
        assert members.dropped == before[2] + 1
        assert await members.of(group, CLOCK.now) == [BOB, ALICE]
    finally:
        members.flush_s, members.pending_max = before[:2]


async def test_a_groups_members_are_bounded_and_expire(world: World) -> None:
    """A group keeps its members last seen, at most its bound, each for its TTL, on the bot's
    clock: past the bound the earliest seen is off the board, past the TTL everyone but its
    players and the asker; the set in Redis expires with its last member."""
    members = world.app.bot_data.members
    before = members.group
    members.group = GroupMembers(world.redis, world.settings.queue, most=2, ttl_s=3600)
    try:
        group = seen_group(world)
        for user in (ALICE, BOB, DAVE, CAROL):
            await ask(world, user, "/daily")
        rnd = await daily_round(world.sessionmaker, ALICE, CLOCK.now)
        for n, user in enumerate((ALICE, BOB, DAVE, CAROL)):
            await finish(world, user, [*misses(rnd, n), rnd.secret_emojis], CLOCK.now)
        for user in (ALICE, BOB, DAVE):  # one after another, a minute apart
            world.standin.send_text(group, user, "/rules")
            await world.settle()
            CLOCK.now += timedelta(minutes=1)
        assert await members.of(group, CLOCK.now) == [DAVE, BOB]  # Alice: the bound
        # Carol asks: she is seen (Bob goes, the earlier of the two) and is on the board
        assert await board_of(world, group, CAROL) == [
            "📅 Daily #1 in this chat",
            "🥇 Dave: 3/8 · 0 seconds",
            "🥈 Carol: 4/8 · 0 seconds",
            "4 players in the world played it today.",
        ]
        key = Keys(world.settings.queue).group_members(group)
        assert 0 < await world.redis.pttl(key) <= 3600 * 1000
        # An hour later nobody was seen since: only the asker is on the board
        CLOCK.now += timedelta(hours=1)
        assert await board_of(world, group, BOB) == [
            "📅 Daily #1 in this chat",
            "🥇 Bob: 2/8 · 0 seconds",
            "4 players in the world played it today.",
        ]
    finally:
        members.group = before


async def test_the_inline_answer_is_the_card_or_an_invitation(world: World) -> None:
    await ask(world, ALICE, "/daily")
    await ask(world, BOB, "/daily")
    rnd = await daily_round(world.sessionmaker, ALICE, CLOCK.now)
    tries = [*misses(rnd, 1), rnd.secret_emojis]
    await finish(world, ALICE, tries, CLOCK.now)
    card = daily.card(
        EN, 1, rows_of(tries, rnd.secret_emojis), length=4, max_attempts=8, cracked=True, streak=1
    )
    queries = {user: world.standin.inline_query(user, "daily") for user in (ALICE, BOB, CAROL)}
    await world.settle()
    [alices] = world.standin.inline_results(queries[ALICE])
    assert alices["title"] == "Codemojex daily #1 2/8"
    assert alices["input_message_content"]["message_text"] == card
    for user in (BOB, CAROL):  # playing, or not even started: nothing about the code
        [invite] = world.standin.inline_results(queries[user])
        text = invite["input_message_content"]["message_text"]
        assert text == texts.daily_invite(EN, 1, BOT)
        assert not set(rnd.palette_emojis) & set(text) and "🟢" not in text
    answer = next(a for a in world.standin.inline_answers if a["inline_query_id"] == queries[ALICE])
    assert answer["is_personal"]
    # Alice picks her card in a group: it is posted there, from her, via the bot
    group = world.new_group()
    posted = world.standin.choose_inline_result(queries[ALICE], alices["id"], group)
    message = world.standin.message(group, posted)
    assert message is not None and message["text"] == card
    await world.settle()
    assert world.replies_to(group, posted) == []  # a card is not a guess


async def test_daily_in_a_channel_says_where_it_is_played(world: World) -> None:
    world.standin.add_channel(CHANNEL, "News")
    world.standin.post_in_channel(CHANNEL, "/daily")
    await world.settle()
    assert [m.text for m in world.said(CHANNEL)] == [texts.daily_in_channel(EN, BOT)]
    async with world.sessionmaker() as session:
        assert (await session.execute(select(func.count()).select_from(Round))).scalar() == 0


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world_behind_proxy(
    bot_database_url: str, bot_queue: str, proxy: TcpProxy
) -> AsyncIterator[World]:
    async with bot_world(through(bot_database_url, proxy), bot_queue + "p", clock=CLOCK) as world:
        yield world


async def test_daily_while_the_database_is_away_waits_for_it(
    world_behind_proxy: World, proxy: TcpProxy
) -> None:
    """Told once that the game is catching up; opened once the database is back."""
    world = world_behind_proxy
    before = len(world.said(ALICE))
    await proxy.stop()
    try:
        world.standin.send_private(ALICE, "/daily")
        await world.standin.wait_for_sent(
            lambda m: m.text == texts.catching_up(EN), 20, chat_id=ALICE
        )
    finally:
        await proxy.start()
    await world.settle()
    assert [m.text for m in world.said(ALICE)[before:]].count(texts.catching_up(EN)) == 1
    async with world.sessionmaker() as session:
        stmt = select(func.count()).select_from(Round).where(Round.kind == ROUND_DAILY)
        assert (await session.execute(stmt)).scalar() == 1
    assert world.errors == []
