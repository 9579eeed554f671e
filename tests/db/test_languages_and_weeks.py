"""A room's language in the store (adopted by its first round, changed by an admin, the language
of everything the store writes for the room) and this week's board read from the won rounds."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import event, select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from codemojex import scoring, usecases
from codemojex.db import Outbox, Room, Round, store
from codemojex.db.engine import Sessions
from codemojex.game import texts
from codemojex.locale import EN, Lang
from codemojex.scoring import feedback, points_for
from tests.db.helpers import attempt, new_room, record_one, wrong_guess

RU, UK, ES = Lang("ru"), Lang("uk"), Lang("es")
MONDAY = datetime(2026, 11, 30, tzinfo=UTC)  # 00:00 UTC: this week's board starts here


async def _outbox(session: AsyncSession, kind: str) -> list[str]:
    stmt = select(Outbox.text).where(Outbox.kind == kind).order_by(Outbox.id)
    rows = list((await session.execute(stmt)).scalars())
    await session.commit()
    return rows


async def test_the_first_round_adopts_its_starters_language(
    session: AsyncSession, sessions: Sessions
) -> None:
    room = await new_room(sessions)
    assert room.language is None  # not chosen yet
    rnd = await usecases.start_round(sessions, room.id, random.Random(1), language=RU)
    assert (await store.get_room(session, room.id)).language == "ru"  # type: ignore[union-attr]
    [announcement] = await _outbox(session, "round")
    assert announcement == texts.round_started(RU, rnd.palette_emojis, rnd.length, 600)
    await usecases.close_round(sessions, rnd.id, "endround")
    # a later starter speaking another language does not change it
    again = await usecases.start_round(sessions, room.id, random.Random(2), language=ES)
    assert (await store.get_room(session, room.id)).language == "ru"  # type: ignore[union-attr]
    assert (await _outbox(session, "round"))[1].startswith("🎯 Новый раунд!")
    assert again.id != rnd.id
    [reveal] = await _outbox(session, "reveal")
    assert reveal == texts.ended_by_admin(RU, rnd.secret)


async def test_a_room_without_a_language_speaks_english(
    session: AsyncSession, sessions: Sessions
) -> None:
    room = await new_room(sessions)
    rnd = await usecases.start_round(sessions, room.id, random.Random(1))  # nobody's language known
    assert (await store.get_room(session, room.id)).language is None  # type: ignore[union-attr]
    [announcement] = await _outbox(session, "round")
    assert announcement == texts.round_started(EN, rnd.palette_emojis, rnd.length, 600)


async def test_an_admin_sets_the_language_as_typed(
    session: AsyncSession, sessions: Sessions
) -> None:
    room = await new_room(sessions)
    updated = await usecases.update_room_settings(sessions, room.id, language="PT-br")
    assert updated.language == "pt_BR"
    with pytest.raises(scoring.InvalidSettings) as info:
        await usecases.update_room_settings(sessions, room.id, language="de", length=5)
    assert info.value.kind == "lang_unknown"
    after = await store.get_room(session, room.id)
    assert after is not None and (after.language, after.length) == ("pt_BR", 4)  # unchanged
    # a chosen language wins over the first round's starter
    await usecases.start_round(sessions, room.id, random.Random(1), language=UK)
    assert (await store.get_room(session, room.id)).language == "pt_BR"  # type: ignore[union-attr]


async def test_results_wins_and_late_answers_are_in_the_rooms_language(
    session: AsyncSession,
    sessions: Sessions,
) -> None:
    room = await new_room(sessions)
    rnd = await usecases.start_round(sessions, room.id, random.Random(3), language=UK)
    ann = await usecases.ensure_player(sessions, room.id, 1, "Ann")
    bob = await usecases.ensure_player(sessions, room.id, 2, "Bob")
    secret, palette = rnd.secret_emojis, rnd.palette_emojis
    miss = wrong_guess(secret, palette)
    await record_one(sessions, attempt(rnd, ann.id, miss, reply_to=10))
    await record_one(sessions, attempt(rnd, ann.id, secret, reply_to=11))
    await record_one(sessions, attempt(rnd, bob.id, secret, reply_to=12))
    [result, winning] = await _outbox(session, "result")
    assert result == texts.result_line(UK, miss, feedback(miss, secret), 1)
    assert winning == texts.result_line(UK, secret, feedback(secret, secret), 2)
    [win] = await _outbox(session, "win")
    assert win == texts.win(UK, "Ann", secret, 2, points_for(2))
    [late] = await _outbox(session, "late")
    assert late == texts.already_solved(UK, secret)


# --- this week's board -----------------------------------------------------------------------


async def _win(
    sessions: Sessions,
    room: Room,
    player_id: str,
    at: datetime,
    attempts: int = 1,
) -> Round:
    """A round started and won by `player_id` at `at`, on its `attempts`-th guess."""
    rnd = await usecases.start_round(sessions, room.id, random.Random(at.toordinal()), now=at)
    secret, palette = rnd.secret_emojis, rnd.palette_emojis
    for n in range(attempts - 1):
        await usecases.record_guesses(
            sessions, [attempt(rnd, player_id, wrong_guess(secret, palette, n))], now=at
        )
    [verdict] = await usecases.record_guesses(sessions, [attempt(rnd, player_id, secret)], now=at)
    assert verdict.won
    return rnd


def test_the_week_starts_on_monday_at_midnight_utc() -> None:
    assert MONDAY.weekday() == 0
    assert store.week_start(MONDAY) == MONDAY
    assert store.week_start(MONDAY - timedelta(microseconds=1)) == MONDAY - timedelta(days=7)
    assert store.week_start(MONDAY + timedelta(days=6, hours=23, minutes=59)) == MONDAY
    # Monday 01:00 in Moscow is still Sunday in UTC: last week
    moscow = timezone(timedelta(hours=3))
    assert store.week_start(datetime(2026, 11, 30, 1, 0, tzinfo=moscow)) == MONDAY - timedelta(7)


async def test_this_weeks_board_counts_only_this_weeks_wins(
    session: AsyncSession, sessions: Sessions
) -> None:
    room = await new_room(sessions)
    other = await new_room(sessions, chat_id=-2002)
    ann = await usecases.ensure_player(sessions, room.id, 1, "Ann")
    bob = await usecases.ensure_player(sessions, room.id, 2, "Bob")
    cat = await usecases.ensure_player(sessions, other.id, 3, "Cat")
    await _win(sessions, room, ann.id, MONDAY - timedelta(seconds=1))  # Sunday 23:59:59: last week
    await _win(sessions, room, ann.id, MONDAY - timedelta(days=3))
    await _win(sessions, room, bob.id, MONDAY)  # Monday 00:00:00: this week
    await _win(sessions, room, ann.id, MONDAY + timedelta(days=2), attempts=2)
    await _win(sessions, room, bob.id, MONDAY + timedelta(days=3), attempts=3)
    await _win(sessions, other, cat.id, MONDAY + timedelta(days=1))  # another room
    timed_out = await usecases.start_round(sessions, room.id, random.Random(9), now=MONDAY)
    await usecases.close_round(sessions, timed_out.id, "timeout", now=MONDAY + timedelta(hours=1))
    friday = MONDAY + timedelta(days=4, hours=12)

    board = await store.weekly_board(session, room.id, now=friday)
    assert [(r.rank, r.display_name, r.points, r.wins, r.best_solve) for r in board] == [
        (1, "Bob", points_for(1) + points_for(3), 2, 1),
        (2, "Ann", points_for(2), 1, 2),
    ]
    # the all-time board has last week's wins too
    all_time = {r.display_name: r.points for r in await store.leaderboard(session, room.id)}
    assert all_time == {"Bob": 180, "Ann": 290}
    # a week later, nobody has won yet
    assert await store.weekly_board(session, room.id, now=friday + timedelta(days=7)) == []
    # last week's board, seen from then
    last = await store.weekly_board(session, room.id, now=MONDAY - timedelta(days=1))
    assert [(r.display_name, r.points, r.wins) for r in last] == [("Ann", 200, 2)]
    assert [
        r.display_name for r in await store.weekly_board(session, room.id, now=friday, limit=1)
    ] == ["Bob"]


async def test_the_weekly_board_reads_the_won_rounds_index(
    session: AsyncSession, sessions: Sessions, pg_engine: AsyncEngine
) -> None:
    """The board's query, as the store sends it, is planned on the partial index of won
    rounds (sequential scans discouraged: on a handful of rows Postgres would scan anyway)."""
    room = await new_room(sessions)
    sent: list[tuple[str, Any]] = []

    def grab(conn: Any, cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if "winning_guess_id IS NOT NULL" in statement:
            sent.append((statement, parameters))

    event.listen(pg_engine.sync_engine, "before_cursor_execute", grab)
    try:
        await store.weekly_board(session, room.id, now=MONDAY)
    finally:
        event.remove(pg_engine.sync_engine, "before_cursor_execute", grab)
    [(statement, parameters)] = sent
    async with pg_engine.connect() as conn:
        await conn.exec_driver_sql("SET enable_seqscan = off")
        plan = "\n".join(
            r[0] for r in await conn.exec_driver_sql("EXPLAIN " + statement, parameters)
        )
    assert "ix_rounds_won" in plan, plan
