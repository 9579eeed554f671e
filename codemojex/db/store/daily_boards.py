"""The daily code as the boards and /stats read it: a group's board of the day, the names on a
page of the world board and the pages its rebuild reads, a player's record. Reads only: the
caller holds the read (`unit.reading`); the writes are `daily.py`'s."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

from sqlalchemy import func, literal_column, select, union_all
from sqlalchemy.ext.asyncio import AsyncSession

from codemojex.db.models import DailyRecord, DailyResult, Player, Room
from codemojex.db.store import rows
from codemojex.values import daily


async def daily_record(session: AsyncSession, tg_user_id: int) -> daily.Record:
    """A player's daily record (empty before their first finished daily)."""
    return rows.record_from(await session.get(DailyRecord, tg_user_id, populate_existing=True))


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
    rows = (await session.execute(stmt)).all()
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
    return {int(uid): name for uid, name in (await session.execute(stmt)).all()}


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
    return [
        DailyEntry(
            int(r.tg_user_id),
            None
            if r.finished_at is None
            else daily.Finish(
                day, int(r.tg_user_id), len(daily.decode_rows(r.rows)), r.cracked, r.finished_at
            ),
        )
        for r in (await session.execute(stmt)).all()
    ]
