"""What the operators read of the database (the metrics and the ops page): bounded reads only,
each in the caller's read (`codemojex.db.reading`).

Every list is a page found through an index (a keyset: the rows after the last one shown),
never a scan of every room; counts are over a partial index.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import func, select, tuple_
from sqlalchemy.ext.asyncio import AsyncSession

from codemojex.db.models import Outbox, Player, Room


@dataclass(frozen=True, slots=True)
class RoomInfo:
    id: str
    chat_id: int
    title: str
    ceiling: int
    players: int
    thread_id: int = 0  # the forum topic (0: none)

    @property
    def label(self) -> str:
        """The chat's title, and the topic for a forum topic's room (a forum's topics share
        the chat's title)."""
        return f"{self.title} · topic {self.thread_id}" if self.thread_id else self.title


async def outbox_backlog(session: AsyncSession) -> int:
    """Outbox rows not sent yet (the partial index ix_outbox_pending holds exactly those)."""
    stmt = select(func.count()).select_from(Outbox).where(Outbox.sent_at.is_(None))
    count = int((await session.execute(stmt)).scalar_one())
    return count


async def rooms_info(session: AsyncSession, room_ids: Sequence[str]) -> dict[str, RoomInfo]:
    """Title, chat, ceiling and players of these rooms (a page of them)."""
    if not room_ids:
        return {}
    players = (
        select(Player.room_id, func.count().label("n"))
        .where(Player.room_id.in_(room_ids))
        .group_by(Player.room_id)
        .subquery()
    )
    stmt = (
        select(Room.id, Room.chat_id, Room.thread_id, Room.title, Room.ceiling, players.c.n)
        .outerjoin(players, players.c.room_id == Room.id)
        .where(Room.id.in_(room_ids))
    )
    rows = (await session.execute(stmt)).all()
    return {
        r.id: RoomInfo(r.id, r.chat_id, r.title, r.ceiling, int(r.n or 0), r.thread_id)
        for r in rows
    }


async def rooms_by_title(
    session: AsyncSession, after: tuple[str, str] | None, limit: int, *, descending: bool = False
) -> list[str]:
    """Room ids in title order (then id), the page after `after` = (title, id) of the last
    row shown: an index range read (ix_rooms_title), however many rooms there are."""
    key = tuple_(Room.title, Room.id)
    stmt = select(Room.id)
    if after is not None:
        stmt = stmt.where(key < after if descending else key > after)
    order = (Room.title.desc(), Room.id.desc()) if descending else (Room.title, Room.id)
    ids = list((await session.execute(stmt.order_by(*order).limit(limit))).scalars())
    return ids
