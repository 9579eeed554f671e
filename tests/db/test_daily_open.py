"""Opening a daily in one transaction (the store backend's `look_daily` and `open_daily`,
through `usecases.daily.open_daily`), on the real Postgres through the migrations (its two
fixed statements) and on SQLite (the portable path): a chat seen for the first time gets its
room and player with the daily; the card handed back is the room's card as the database has
it after the commit (what the bot writes into Redis without reading it again); opening twice,
and opening at once from a chat with no room yet, opens one daily."""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from codemojex import usecases
from codemojex.db import DailyResult, Outbox, Player, Room, Round, store
from codemojex.db.store.lookups import RoomCard
from codemojex.game import taps, texts
from codemojex.locale import EN, Lang
from codemojex.state.cards import card_of
from codemojex.usecases.daily import Opened, open_daily
from codemojex.values import ids
from codemojex.values.daily import PrivateChat
from codemojex.values.types import KIND_ROUND, ROUND_DAILY, TIMEOUT
from tests.helpers import writes
from tests.helpers.dailies import daily_round, misses, play
from tests.helpers.sql import statements, verbs

NOON = datetime(2026, 3, 14, 12, tzinfo=UTC)
ALICE, BOB = 5101, 5102
RU = Lang("ru")


@pytest.fixture(params=["postgres", "sqlite"])
def dbs(request: pytest.FixtureRequest) -> async_sessionmaker[AsyncSession]:
    """The store's two ways: Postgres's fixed statements, SQLite's portable ones."""
    name = "sessions" if request.param == "postgres" else "sqlite_sessions"
    sessions: async_sessionmaker[AsyncSession] = request.getfixturevalue(name)
    return sessions


async def opens(
    sessions: async_sessionmaker[AsyncSession],
    user: int,
    now: datetime = NOON,
    *,
    name: str | None = None,
    language: Lang = EN,
    ceiling: int = 3,
) -> Opened:
    chat = PrivateChat(
        user, user, name or f"user {user}", default_ceiling=ceiling, round_timeout_s=700
    )
    return await open_daily(
        sessions, chat=chat, language=language, rng=random.Random(user), now=now
    )


async def stored_card(sessions: async_sessionmaker[AsyncSession], chat_id: int) -> RoomCard:
    async with sessions() as session:
        room = await store.room_by_chat(session, chat_id)
        assert room is not None
        card = await store.room_card(session, room.id)
    assert card is not None
    return card


def same_card(handed: RoomCard | None, stored: RoomCard) -> None:
    """The card handed back is the one the database has (what Redis is written from)."""
    assert handed is not None
    assert card_of(handed) == card_of(stored)
    assert (handed.seats, handed.banned) == (stored.seats, stored.banned)


async def test_a_first_daily_makes_the_room_and_player_and_hands_back_its_card(
    dbs: async_sessionmaker[AsyncSession],
) -> None:
    opened = await opens(dbs, ALICE, language=RU, ceiling=3)
    assert opened.view.status == "opened" and opened.view.left == 8
    stored = await stored_card(dbs, ALICE)
    same_card(opened.card, stored)
    room, rnd = stored.room, stored.open_round
    assert (room.chat_id, room.thread_id, room.language, room.ceiling, room.round_timeout_s) == (
        ALICE, 0, "ru", 3, 700
    )  # fmt: skip
    assert rnd is not None and (rnd.kind, rnd.max_attempts, rnd.expires_at) == (
        ROUND_DAILY, 8, NOON.replace(hour=0) + timedelta(days=1)
    )  # fmt: skip
    puzzle = opened.view.puzzle
    assert (rnd.palette_emojis, rnd.secret_emojis) == (puzzle.palette, puzzle.secret)
    async with dbs() as session:
        [player] = (await session.execute(select(Player))).scalars()
        [result] = (await session.execute(select(DailyResult))).scalars()
        [post] = (await session.execute(select(Outbox))).scalars()
        await session.commit()
    assert stored.seats == {ALICE: player.id} and player.display_name == f"user {ALICE}"
    assert (result.round_id, result.display_name, result.started_at) == (
        rnd.id, f"user {ALICE}", NOON
    )  # fmt: skip
    assert (post.chat_id, post.kind, post.round_id, post.thread_id) == (
        ALICE, KIND_ROUND, rnd.id, None
    )  # fmt: skip
    assert post.text == texts.daily_puzzle(RU, 1, puzzle.palette, 4, 8)
    assert post.markup == taps.keyboard(rnd.id, puzzle.palette)


async def test_again_while_playing_hands_back_the_card_and_after_the_finish_none(
    dbs: async_sessionmaker[AsyncSession],
) -> None:
    first = await opens(dbs, ALICE)
    await opens(dbs, BOB)  # the day's puzzle is there: read, not drawn again
    again = await opens(dbs, ALICE, NOON + timedelta(hours=1), name="Alice", language=RU)
    assert again.view.status == "playing" and again.view.puzzle == first.view.puzzle
    same_card(again.card, await stored_card(dbs, ALICE))
    # /daily again opens nothing: neither the chat's language nor the player's name changes
    stored = await stored_card(dbs, ALICE)
    assert stored.room.language == "en"
    rnd = await daily_round(dbs, ALICE, NOON)
    await play(dbs, ALICE, [*misses(rnd, 1), rnd.secret_emojis], NOON + timedelta(hours=2))
    done = await opens(dbs, ALICE, NOON + timedelta(hours=3))
    assert done.view.status == "finished" and done.view.cracked and len(done.view.rows) == 2
    assert done.card is None
    async with dbs() as session:
        rounds = (await session.execute(select(func.count()).select_from(Round))).scalar_one()
        posts = (
            await session.execute(
                select(func.count()).select_from(Outbox).where(Outbox.kind == KIND_ROUND)
            )
        ).scalar_one()
        await session.commit()
    assert (rounds, posts) == (2, 2)  # Alice's and Bob's


async def test_the_next_day_renames_speaks_closes_yesterdays_and_keeps_seats_and_bans(
    dbs: async_sessionmaker[AsyncSession],
) -> None:
    await opens(dbs, ALICE)
    yesterday = await daily_round(dbs, ALICE, NOON)
    # Someone else seated and banned in the private chat's room: the card carries both.
    room = (await stored_card(dbs, ALICE)).room
    async with dbs() as session:
        other = await usecases.ensure_player(dbs, room.id, BOB, "Bob", player_id=ids.mint("PLR"))
        await writes.ban(dbs, room.id, other.id, actor=None)
    tomorrow = NOON + timedelta(days=1)
    opened = await opens(dbs, ALICE, tomorrow, name="Alice B.", language=RU)
    assert opened.view.status == "opened" and opened.view.puzzle.number == 2
    stored = await stored_card(dbs, ALICE)
    same_card(opened.card, stored)
    assert stored.banned == {BOB} and set(stored.seats) == {ALICE, BOB}
    assert stored.room.language == "ru"
    async with dbs() as session:
        old = await session.get(Round, yesterday.id, populate_existing=True)
        names = (await session.execute(select(Player.display_name))).scalars().all()
        await session.commit()
    assert old is not None and (old.ended_at, old.end_reason) == (tomorrow, TIMEOUT)
    assert sorted(names) == ["Alice B.", "Bob"]


async def test_a_chat_with_no_room_opened_at_once_opens_one_daily(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    # Several bot processes take the same new player's /daily at the same moment: one room,
    # one player, one daily; the others say how the player stands and write the same card.
    views = await asyncio.gather(*(opens(sessions, ALICE) for _ in range(4)))
    assert sorted(v.view.status for v in views) == ["opened", "playing", "playing", "playing"]
    async with sessions() as session:
        counts = [
            (await session.execute(select(func.count()).select_from(table))).scalar_one()
            for table in (Room, Player, Round, DailyResult, Outbox)
        ]
        await session.commit()
    assert counts == [1, 1, 1, 1, 1]
    stored = await stored_card(sessions, ALICE)
    for each in views:  # the losers' second look finds the winner's daily, and its card
        same_card(each.card, stored)


async def test_on_postgres_a_daily_is_one_transaction_of_two_statements(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    await opens(sessions, BOB)  # the day's puzzle drawn
    engine = sessions.kw["bind"]
    with statements(engine, transactions=True) as first:
        await opens(sessions, ALICE)  # a new chat: room, player, daily
    with statements(engine, transactions=True) as again:
        await opens(sessions, ALICE, NOON + timedelta(minutes=1))
    assert verbs(first) == ["BEGIN", "SELECT", "WITH", "COMMIT"]
    assert verbs(again) == ["BEGIN", "SELECT", "COMMIT"]
