"""The daily code's rows as a transaction writes them: the day's puzzle, a player's daily of a
day (with its round), a daily round's progress and the player's record, in the values of
`codemojex.values.daily`. `codemojex.game.daily` decides; this loads and writes, in the
caller's transaction (`usecases.daily` drawing the day's puzzle, the backends recording a batch
for `usecases.guesses`, `usecases.retention` trimming old dailies); opening a daily is the
backends' (`backend.py`). The boards' and /stats' reads are `daily_boards.py`.

The day's puzzle is drawn once for the whole deployment: `insert_puzzle` is an INSERT … ON
CONFLICT DO NOTHING, and whoever loses the race reads the winner's row, so any number of bot
processes agree on it. Both databases spell INSERT … ON CONFLICT alike: the upserts here are one
statement text for both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING

from sqlalchemy import Date, bindparam, delete, func, select, text, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from codemojex.db.models import DailyPuzzle, DailyRecord, DailyResult, Round, UTCDateTime
from codemojex.db.store import rows
from codemojex.values import daily
from codemojex.values.clock import utcnow

if TYPE_CHECKING:
    from codemojex.db.unit import Unit


async def get_puzzle(db: AsyncSession, day: date) -> daily.Puzzle | None:
    stmt = select(DailyPuzzle.__table__).where(DailyPuzzle.day == day)
    found = (await db.execute(stmt)).first()
    return None if found is None else rows.puzzle_from(found)


async def first_day(db: AsyncSession) -> date | None:
    """The deployment's first daily (what #1 was), or None before any."""
    return (await db.execute(select(func.min(DailyPuzzle.day)))).scalar_one()


_INSERT_PUZZLE = text(
    """
    INSERT INTO daily_puzzles (day, number, palette, secret, length, max_attempts, created_at)
    VALUES (:day, :number, :palette, :secret, :length, :max_attempts, :now)
    ON CONFLICT (day) DO NOTHING
    """
).bindparams(bindparam("day", type_=Date()), bindparam("now", type_=UTCDateTime()))


async def insert_puzzle(tx: Unit, puzzle: daily.Puzzle) -> None:
    """Store `puzzle` as its day's, unless that day has one already (then nothing changes).
    On Postgres an insert racing another waits for it to commit, then does nothing: read the
    day's puzzle after this, it is the one everybody plays."""
    await tx.conn.execute(
        _INSERT_PUZZLE,
        {
            "day": puzzle.day,
            "number": puzzle.number,
            "palette": "".join(puzzle.palette),
            "secret": "".join(puzzle.secret),
            "length": puzzle.length,
            "max_attempts": puzzle.max_attempts,
            "now": utcnow(),
        },
    )


@dataclass(frozen=True, slots=True)
class Today:
    """A player's daily of one day, with their record (None: never finished a daily)."""

    result: DailyResult | None
    record: daily.Record


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
        return Today(row[0], rows.record_from(row[1]))
    record = await db.get(DailyRecord, tg_user_id, populate_existing=True)
    return Today(None, rows.record_from(record))


# --- recording guesses (the backends' write_batch, under the rounds' locks) --------------------


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
    return {r.round_id: rows.daily_round(r) for r in await conn.execute(stmt)}


_UPSERT_RECORD = text(
    """
    INSERT INTO daily_records (tg_user_id, streak, best, last_cracked, histogram, updated_at)
    VALUES (:tg_user_id, :streak, :best, :last_cracked, :histogram, :updated_at)
    ON CONFLICT (tg_user_id) DO UPDATE SET
        streak = excluded.streak,
        best = excluded.best,
        last_cracked = excluded.last_cracked,
        histogram = excluded.histogram,
        updated_at = excluded.updated_at
    """
).bindparams(
    bindparam("last_cracked", type_=Date()),
    bindparam("updated_at", type_=UTCDateTime()),
)


async def write_progress(tx: Unit, progress: Sequence[daily.Progress]) -> None:
    """What a batch changed in its daily rounds: every round's rows; a finish's result and the
    player's record (written whole: decided under the round's lock, and a player's dailies
    are scored one after another in their lane)."""
    if not progress:
        return
    playing = [p for p in progress if p.finish is None]
    done = [p for p in progress if p.finish is not None]
    table = DailyResult
    if playing:
        await tx.conn.execute(
            update(table)
            .where(table.round_id == bindparam("b_round"))
            .values(rows=bindparam("b_rows")),
            [{"b_round": p.round_id, "b_rows": daily.encode_rows(p.rows)} for p in playing],
        )
    if not done:
        return
    await tx.conn.execute(
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
    if records:
        await tx.conn.execute(_UPSERT_RECORD, records)


# --- retention ---------------------------------------------------------------------------------


async def trim_daily(tx: Unit, before: date, batch: int) -> int:
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
    doomed = list((await tx.conn.execute(oldest)).scalars())
    if not doomed:
        return 0
    result = await tx.conn.execute(delete(Round).where(Round.id.in_(doomed)))
    return int(getattr(result, "rowcount", 0) or 0)
