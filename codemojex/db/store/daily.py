"""The daily code's rows: the day's puzzle, a player's daily of a day (with its round), and a
player's record (streaks, histogram), in the values of `codemojex.values.daily`.
`codemojex.game.daily` decides; this loads and writes.

Two kinds of function here:
- parts of a transaction the caller holds (`usecases.daily` drawing the day's puzzle when
  opening a daily, `store.batch` recording a batch for `usecases.guesses`): they never
  commit (opening itself is `daily_open`'s);
- reads for the bot, the board and the operators, and the retention trim: each commits (or
  rolls back) its own transaction, as every use-case of the store does.

The day's puzzle is drawn once for the whole deployment: `insert_puzzle` is an INSERT … ON
CONFLICT DO NOTHING, and whoever loses the race reads the winner's row, so any number of bot
processes agree on it.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

from sqlalchemy import bindparam, delete, func, literal_column, select, union_all, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from codemojex.db.models import (
    DailyPuzzle,
    DailyRecord,
    DailyResult,
    Player,
    Room,
    Round,
    UTCDateTime,
    utcnow,
)
from codemojex.values import daily

Db = AsyncSession | AsyncConnection


def _insert(db: Db, table: Any) -> Any:
    """INSERT with ON CONFLICT in the connection's dialect (Postgres, or SQLite's)."""
    name = (db.get_bind() if isinstance(db, AsyncSession) else db).dialect.name
    return (postgresql.insert if name == "postgresql" else sqlite.insert)(table)


# --- in the caller's transaction ---------------------------------------------------------------


def puzzle_of(row: DailyPuzzle) -> daily.Puzzle:
    return daily.Puzzle(
        day=row.day,
        number=row.number,
        palette=row.palette_emojis,
        secret=row.secret_emojis,
        length=row.length,
        max_attempts=row.max_attempts,
    )


async def get_puzzle(db: AsyncSession, day: date) -> daily.Puzzle | None:
    row = (
        await db.execute(
            select(DailyPuzzle)
            .where(DailyPuzzle.day == day)
            .execution_options(populate_existing=True)
        )
    ).scalar_one_or_none()
    return None if row is None else puzzle_of(row)


async def first_day(db: AsyncSession) -> date | None:
    """The deployment's first daily (what #1 was), or None before any."""
    return (await db.execute(select(func.min(DailyPuzzle.day)))).scalar_one()


async def insert_puzzle(db: AsyncSession, puzzle: daily.Puzzle) -> None:
    """Store `puzzle` as its day's, unless that day has one already (then nothing changes).
    On Postgres an insert racing another waits for it to commit, then does nothing: read the
    day's puzzle after this, it is the one everybody plays."""
    stmt = _insert(db, DailyPuzzle).values(
        day=puzzle.day,
        number=puzzle.number,
        palette="".join(puzzle.palette),
        secret="".join(puzzle.secret),
        length=puzzle.length,
        max_attempts=puzzle.max_attempts,
        created_at=utcnow(),
    )
    await db.execute(stmt.on_conflict_do_nothing(index_elements=["day"]))


@dataclass(frozen=True, slots=True)
class Today:
    """A player's daily of one day, with their record (None: never finished a daily)."""

    result: DailyResult | None
    record: daily.Record


def record_of(row: DailyRecord | None, max_attempts: int = daily.ATTEMPTS) -> daily.Record:
    if row is None:
        return daily.Record(histogram=daily.empty_histogram(max_attempts))
    return daily.Record(
        streak=row.streak,
        best=row.best,
        last_cracked=row.last_cracked,
        histogram=daily.decode_histogram(row.histogram, max_attempts),
    )


async def today_of(db: AsyncSession, day: date, tg_user_id: int) -> Today:
    """The player's result of `day` (None: not opened) and their record."""
    stmt = (
        select(DailyResult, DailyRecord)
        .select_from(DailyResult)
        .outerjoin(DailyRecord, DailyRecord.tg_user_id == DailyResult.tg_user_id)
        .where(DailyResult.day == day, DailyResult.tg_user_id == tg_user_id)
        .execution_options(populate_existing=True)
    )
    row = (await db.execute(stmt)).first()
    if row is not None:
        return Today(row[0], record_of(row[1]))
    record = await db.get(DailyRecord, tg_user_id, populate_existing=True)
    return Today(None, record_of(record))


# --- recording guesses (store.batch, under the rounds' locks) ----------------------------------


async def load_rounds(
    conn: AsyncConnection, round_ids: Sequence[int]
) -> dict[int, daily.DailyRound]:
    """The daily progress of these rounds (the daily ones among them), read under their locks:
    the result row of each, its puzzle's number and the player's record."""
    if not round_ids:
        return {}
    stmt = (
        select(
            DailyResult.round_id,
            DailyResult.day,
            DailyResult.tg_user_id,
            DailyResult.started_at,
            DailyResult.rows,
            DailyResult.finished_at,
            DailyResult.cracked,
            DailyPuzzle.number,
            DailyPuzzle.max_attempts,
            DailyRecord.streak,
            DailyRecord.best,
            DailyRecord.last_cracked,
            DailyRecord.histogram,
        )
        .join(DailyPuzzle, DailyPuzzle.day == DailyResult.day)
        .outerjoin(DailyRecord, DailyRecord.tg_user_id == DailyResult.tg_user_id)
        .where(DailyResult.round_id.in_(list(round_ids)))
    )
    out: dict[int, daily.DailyRound] = {}
    for r in await conn.execute(stmt):
        record = daily.Record(
            streak=r.streak or 0,
            best=r.best or 0,
            last_cracked=r.last_cracked,
            histogram=daily.decode_histogram(r.histogram, r.max_attempts),
        )
        out[r.round_id] = daily.DailyRound(
            day=r.day,
            number=r.number,
            tg_user_id=int(r.tg_user_id),
            started_at=r.started_at,
            rows=daily.decode_rows(r.rows),
            finished_at=r.finished_at,
            cracked=bool(r.cracked),
            record=record,
        )
    return out


async def write_progress(conn: AsyncConnection, progress: Sequence[daily.Progress]) -> None:
    """What a batch changed in its daily rounds: every round's rows; a finish's result and the
    player's record (written whole: decided under the round's lock, and a player's dailies
    are scored one after another in their lane)."""
    if not progress:
        return
    playing = [p for p in progress if p.finish is None]
    done = [p for p in progress if p.finish is not None]
    table = DailyResult
    if playing:
        await conn.execute(
            update(table)
            .where(table.round_id == bindparam("b_round"))
            .values(rows=bindparam("b_rows")),
            [{"b_round": p.round_id, "b_rows": daily.encode_rows(p.rows)} for p in playing],
        )
    if not done:
        return
    await conn.execute(
        update(table)
        .where(table.round_id == bindparam("b_round"))
        .values(
            rows=bindparam("b_rows"),
            finished_at=bindparam("b_at", type_=UTCDateTime()),
            cracked=bindparam("b_cracked"),
        ),
        [
            {
                "b_round": p.round_id,
                "b_rows": daily.encode_rows(p.rows),
                "b_at": p.finish.finished_at,
                "b_cracked": p.finish.cracked,
            }
            for p in done
            if p.finish is not None
        ],
    )
    records = [
        {
            "tg_user_id": p.tg_user_id,
            "streak": p.record.streak,
            "best": p.record.best,
            "last_cracked": p.record.last_cracked,
            "histogram": daily.encode_histogram(p.record.histogram),
            "updated_at": p.finish.finished_at,
        }
        for p in sorted(done, key=lambda p: p.tg_user_id)  # rows locked in a stable order
        if p.record is not None and p.finish is not None
    ]
    stmt = _insert(conn, DailyRecord)
    new = stmt.excluded
    await conn.execute(
        stmt.on_conflict_do_update(
            index_elements=["tg_user_id"],
            set_={
                "streak": new.streak,
                "best": new.best,
                "last_cracked": new.last_cracked,
                "histogram": new.histogram,
                "updated_at": new.updated_at,
            },
        ),
        records,
    )


# --- reads (each its own transaction) ----------------------------------------------------------


async def daily_record(session: AsyncSession, tg_user_id: int) -> daily.Record:
    """A player's daily record (empty before their first finished daily)."""
    try:
        return record_of(await session.get(DailyRecord, tg_user_id, populate_existing=True))
    finally:
        await session.commit()


@dataclass(frozen=True, slots=True)
class MemberDaily:
    """A group member's daily of the day (texts.GroupRow)."""

    tg_user_id: int
    name: str
    attempts: int
    cracked: bool
    seconds: int | None  # time taken; None while still playing


async def group_dailies(
    session: AsyncSession,
    chat_id: int,
    day: date,
    limit: int,
    *,
    also: Collection[int] = (),
    keep: int | None = None,
) -> list[MemberDaily]:
    """The dailies of `day` of the chat's members: its players (in any of its rooms: its forum
    topics too), by the name they have there, and the users of `also` (the others the bot saw
    in the chat), by the name they opened the daily with. Finished first (cracked by attempts,
    then the others), then by time taken; at most `limit`, and `keep`'s (the asker's) after
    them when the cut left it out. One statement of index walks only: the chat's rooms, their
    players, each one's result by primary key; `also`'s results by primary key."""
    players = (
        select(Player.tg_user_id, func.min(Player.display_name).label("name"))
        .join(Room, Room.id == Player.room_id)
        .where(Room.chat_id == chat_id)
        .group_by(Player.tg_user_id)
        .subquery()
    )
    result = (
        DailyResult.tg_user_id,
        DailyResult.rows,
        DailyResult.cracked,
        DailyResult.started_at,
        DailyResult.finished_at,
    )
    stmt: Any = select(*result, players.c.name, literal_column("0").label("seen")).join(
        players,
        (players.c.tg_user_id == DailyResult.tg_user_id) & (DailyResult.day == day),
    )
    seen = sorted({int(uid) for uid in also})
    if seen:
        others: Any = select(
            *result, DailyResult.display_name.label("name"), literal_column("1").label("seen")
        ).where(DailyResult.day == day, DailyResult.tg_user_id.in_(seen))
        stmt = union_all(stmt, others)
    try:
        rows = (await session.execute(stmt)).all()
    finally:
        await session.commit()
    found: dict[int, MemberDaily] = {}
    for r in sorted(rows, key=lambda r: r.seen):  # a player's name in the chat first
        uid = int(r.tg_user_id)
        if uid in found:
            continue
        found[uid] = MemberDaily(
            tg_user_id=uid,
            name=r.name,
            attempts=len(daily.decode_rows(r.rows)),
            cracked=bool(r.cracked),
            seconds=None
            if r.finished_at is None
            else max(0, int((r.finished_at - r.started_at).total_seconds())),
        )
    ranked = sorted(
        found.values(),
        key=lambda m: (m.seconds is None, not m.cracked, m.attempts, m.seconds or 0, m.name),
    )
    shown = ranked[: max(0, limit)]
    if keep is not None and keep in found and found[keep] not in shown:
        shown.append(found[keep])
    return shown


async def daily_names(
    session: AsyncSession, day: date, tg_user_ids: Sequence[int]
) -> dict[int, str]:
    """The names these players had when they opened `day`'s daily (a board's page of them)."""
    if not tg_user_ids:
        return {}
    stmt = select(DailyResult.tg_user_id, DailyResult.display_name).where(
        DailyResult.day == day, DailyResult.tg_user_id.in_(list(tg_user_ids))
    )
    try:
        return {int(uid): name for uid, name in (await session.execute(stmt)).all()}
    finally:
        await session.commit()


@dataclass(frozen=True, slots=True)
class DailyEntry:
    """A player who opened `day`'s daily, and their finish if they finished it."""

    tg_user_id: int
    finish: daily.Finish | None


async def daily_entries(
    session: AsyncSession, day: date, after: int | None, limit: int
) -> list[DailyEntry]:
    """The day's players in user-id order, the page after `after` (a primary-key range: the
    board's rebuild reads the day a page at a time)."""
    stmt = select(
        DailyResult.tg_user_id, DailyResult.rows, DailyResult.cracked, DailyResult.finished_at
    ).where(DailyResult.day == day)
    if after is not None:
        stmt = stmt.where(DailyResult.tg_user_id > after)
    stmt = stmt.order_by(DailyResult.tg_user_id).limit(limit)
    try:
        rows = (await session.execute(stmt)).all()
    finally:
        await session.commit()
    return [
        DailyEntry(
            int(r.tg_user_id),
            None
            if r.finished_at is None
            else daily.Finish(
                day, int(r.tg_user_id), len(daily.decode_rows(r.rows)), r.cracked, r.finished_at
            ),
        )
        for r in rows
    ]


async def trim_daily(session: AsyncSession, before: date, batch: int) -> int:
    """Delete up to `batch` players' dailies of days before `before`, oldest first: their
    rounds, and with them (foreign keys, ON DELETE CASCADE) their results and guesses; the
    number deleted. The day's puzzle and the players' records stay. Safe from several
    workers at once."""
    oldest = (
        select(DailyResult.round_id)
        .where(DailyResult.day < before)
        .order_by(DailyResult.day)
        .limit(batch)
    )
    try:
        doomed = list((await session.execute(oldest)).scalars())
        if not doomed:
            await session.commit()
            return 0
        result = await session.execute(delete(Round).where(Round.id.in_(doomed)))
        await session.commit()
    except BaseException:
        await session.rollback()
        raise
    return int(getattr(result, "rowcount", 0) or 0)
