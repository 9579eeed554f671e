"""Players written with their guesses (store.seats): the bot writes no row per guess; the
worker's transaction inserts a new player under the id of their lane, renames one named
anew, and records the guess of a lane whose (room, user) already has a player as that
player's. On Postgres and on SQLite (the embedded default)."""

from __future__ import annotations

import asyncio
import random

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from codemojex import usecases
from codemojex.db import Guess, LeaderboardEntry, Player, Round
from codemojex.db.store import Seat
from codemojex.values import ids
from tests.db.helpers import attempt, new_room, wrong_guess


@pytest.fixture(params=["postgres", "sqlite"])
def db(
    request: pytest.FixtureRequest,
) -> async_sessionmaker[AsyncSession]:
    name = "sessions" if request.param == "postgres" else "sqlite_sessions"
    sessions: async_sessionmaker[AsyncSession] = request.getfixturevalue(name)
    return sessions


async def _round(db: async_sessionmaker[AsyncSession], chat: int) -> Round:
    room = await new_room(db, chat_id=chat)
    return await usecases.start_round(db, room.id, random.Random(chat))


async def _players(db: async_sessionmaker[AsyncSession]) -> dict[int, tuple[str, str]]:
    async with db() as s:
        rows = (await s.execute(select(Player.tg_user_id, Player.id, Player.display_name))).all()
    return {int(u): (pid, name) for u, pid, name in rows}


async def test_a_new_player_is_written_with_the_guess_under_its_lane(
    db: async_sessionmaker[AsyncSession],
) -> None:
    rnd = await _round(db, -31)
    lane = ids.mint(ids.PLAYER)
    miss = wrong_guess(rnd.secret_emojis, rnd.palette_emojis)
    (verdict,) = await usecases.record_guesses(
        db, [attempt(rnd, lane, miss)], seats=[Seat(lane, rnd.room_id, 11, "Ann")]
    )
    assert verdict.kind == "scored" and verdict.attempt_no == 1
    assert await _players(db) == {11: (lane, "Ann")}
    # Her next guess carries no name (the bot sent it): the row keeps it; a new name renames.
    await usecases.record_guesses(
        db, [attempt(rnd, lane, miss)], seats=[Seat(lane, rnd.room_id, 11)]
    )
    assert await _players(db) == {11: (lane, "Ann")}
    second, third = await usecases.record_guesses(
        db,
        [attempt(rnd, lane, miss), attempt(rnd, lane, miss)],
        seats=[Seat(lane, rnd.room_id, 11, "Ann B."), Seat(lane, rnd.room_id, 11)],
    )
    assert (second.attempt_no, third.attempt_no) == (3, 4)
    assert await _players(db) == {11: (lane, "Ann B.")}


async def test_a_guess_of_a_player_the_database_knows_under_another_id_is_theirs(
    db: async_sessionmaker[AsyncSession],
) -> None:
    """Redis lost the id the bot had given (its data, say): the database's player wins."""
    rnd = await _round(db, -32)
    async with db() as s:
        ann = await usecases.ensure_player(db, rnd.room_id, 12, "Ann")
    lane = ids.mint(ids.PLAYER)
    async with db() as s:
        (verdict,) = await usecases.record_guesses(
            db,
            [attempt(rnd, lane, rnd.secret_emojis)],
            seats=[Seat(lane, rnd.room_id, 12, "Ann")],
        )
    assert verdict.won
    assert await _players(db) == {12: (ann.id, "Ann")}
    async with db() as s:
        guess = (await s.execute(select(Guess))).scalar_one()
        board = (await s.execute(select(LeaderboardEntry))).scalar_one()
        won = (await s.execute(select(Round).where(Round.id == rnd.id))).scalar_one()
    assert guess.player_id == board.player_id == won.winner_player_id == ann.id


async def test_a_player_without_a_name_yet_gets_one_then_their_own(
    db: async_sessionmaker[AsyncSession],
) -> None:
    """A retried job may be recorded after a later one that carries no name."""
    rnd = await _round(db, -33)
    lane = ids.mint(ids.PLAYER)
    miss = wrong_guess(rnd.secret_emojis, rnd.palette_emojis)
    await usecases.record_guesses(
        db, [attempt(rnd, lane, miss)], seats=[Seat(lane, rnd.room_id, 13)]
    )
    assert await _players(db) == {13: (lane, "player 13")}
    await usecases.record_guesses(
        db, [attempt(rnd, lane, miss)], seats=[Seat(lane, rnd.room_id, 13, "Cat")]
    )
    assert await _players(db) == {13: (lane, "Cat")}


async def test_two_workers_seat_a_new_player_at_once(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    """Two flushes with guesses of one new player (two jobs of one lane in flight), each in
    its own transaction: one row, both guesses recorded as its player's."""
    rnd = await _round(sessions, -34)
    lane = ids.mint(ids.PLAYER)
    miss = wrong_guess(rnd.secret_emojis, rnd.palette_emojis)

    async def flush() -> None:
        await usecases.record_guesses(
            sessions, [attempt(rnd, lane, miss)], seats=[Seat(lane, rnd.room_id, 14, "Dee")]
        )

    await asyncio.gather(flush(), flush())
    assert await _players(sessions) == {14: (lane, "Dee")}
    async with sessions() as s:
        players = {g.player_id for g in (await s.execute(select(Guess))).scalars()}
    assert players == {lane}


async def test_two_lanes_of_one_player_in_a_batch_are_both_theirs(
    db: async_sessionmaker[AsyncSession],
) -> None:
    """After Redis lost a seat the bot may give a player a second lane while the first still
    holds guesses: both are recorded as the one player, in order."""
    rnd = await _round(db, -35)
    first, second = ids.mint(ids.PLAYER), ids.mint(ids.PLAYER)
    miss = wrong_guess(rnd.secret_emojis, rnd.palette_emojis)
    verdicts = await usecases.record_guesses(
        db,
        [attempt(rnd, first, miss), attempt(rnd, second, miss)],
        seats=[Seat(first, rnd.room_id, 15, "Eve"), Seat(second, rnd.room_id, 15, "Eve")],
    )
    assert [v.attempt_no for v in verdicts] == [1, 2]
    players = await _players(db)
    assert list(players) == [15] and players[15][0] in (first, second)
