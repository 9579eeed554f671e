"""What the ops page's tables show, read a bounded page at a time.

Rooms sort by pending guesses or last activity (the lanes' ranked books: Redis finds a rank
without walking the set) or by title (an index range in Postgres, after the last title
shown); then only the page's rooms are read in detail. No refresh reads every room.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from codemojex.db.reading import reading
from codemojex.db.store.ops import rooms_by_title, rooms_info
from codemojex.lanes import Lanes
from codemojex.lanes.views import DeadJob
from codemojex.values import ids

Sort = Literal["pending", "activity", "title"]
SORTS: Final[tuple[Sort, ...]] = ("pending", "activity", "title")
_SEP: Final = "\x1f"  # between title and id in a title cursor (never in either)
# A table's rows per page (never a scan of every room), its offsets and title cursors at most.
PAGE_ROWS: Final = 25
OFFSET_MAX: Final = 10_000_000
CURSOR_MAX: Final = 512


def check_cursor(sort: Sort, cursor: str) -> str | None:
    """What is wrong with a cursor of the rooms table in `sort` (None: nothing). A title
    cursor is a title and a room id (as `rooms_page` writes it), an offset is a whole number."""
    if not cursor:
        return None
    if sort == "title":
        title, sep, last_id = cursor.partition(_SEP)
        wrong = "not a cursor of the table by title"
        if len(cursor) > CURSOR_MAX or not sep or "\x00" in title:
            return wrong
        try:
            title.encode("utf-8")  # no lone surrogate (a %ED%A0%80 in the URL)
        except UnicodeEncodeError:
            return wrong
        return None if ids.is_valid(last_id, ids.ROOM) else wrong
    most = OFFSET_MAX
    if not (cursor.isascii() and cursor.isdigit() and len(cursor) <= len(str(most))):
        return f"a whole number up to {most}"
    return None if int(cursor) <= most else f"a whole number up to {most}"


@dataclass(frozen=True, slots=True)
class RoomRow:
    id: str
    title: str
    chat_id: int | None
    players: int
    pending: int
    in_flight: int
    ceiling: int | None
    paused: bool
    oldest_wait_s: float | None
    idle_s: float | None  # since its last guess


@dataclass(frozen=True, slots=True)
class RoomsPage:
    sort: Sort
    descending: bool
    rows: list[RoomRow]
    total: int | None  # rooms in the sort's book (None for title: not counted, see above)
    next_cursor: str | None
    prev_cursor: str | None
    offset: int


@dataclass(frozen=True, slots=True)
class DeadRow:
    job: DeadJob
    title: str


async def rooms_page(
    lanes: Lanes,
    sessionmaker: async_sessionmaker[AsyncSession],
    sort: Sort,
    descending: bool,
    cursor: str,
    now_ms: int,
    rows: int = PAGE_ROWS,
) -> RoomsPage:
    total: int | None = None
    offset = 0
    next_cursor: str | None = None
    prev_cursor: str | None = None
    if sort == "title":
        title, _, last_id = cursor.partition(_SEP)
        async with reading(sessionmaker) as session:
            ids = await rooms_by_title(
                session, (title, last_id) if cursor else None, rows + 1, descending=descending
            )
        more, ids = len(ids) > rows, ids[:rows]
        prev_cursor = "" if cursor else None  # a keyset pages forward; back is to the start
    else:
        offset = int(cursor) if cursor else 0
        book = "depth" if sort == "pending" else "activity"
        total, ranked = await lanes.rooms_by(book, offset, rows, descending=descending)
        ids = [room for room, _ in ranked]
        more = offset + rows < total
        prev_cursor = str(max(0, offset - rows)) if offset else None
    queue = await lanes.rooms(ids)
    async with reading(sessionmaker) as session:
        info = await rooms_info(session, ids)
    out = []
    for q in queue:
        known = info.get(q.room)
        out.append(
            RoomRow(
                q.room,
                known.label if known else "",
                known.chat_id if known else None,
                known.players if known else 0,
                q.pending,
                q.in_flight,
                q.ceiling,
                q.paused,
                None if q.oldest_ms is None else max(0, now_ms - q.oldest_ms) / 1000,
                None if q.last_enqueue_ms is None else max(0, now_ms - q.last_enqueue_ms) / 1000,
            )
        )
    if more and out:
        last = out[-1]
        next_cursor = f"{last.title}{_SEP}{last.id}" if sort == "title" else str(offset + rows)
    return RoomsPage(sort, descending, out, total, next_cursor, prev_cursor, offset)


async def dead_page(
    lanes: Lanes, sessionmaker: async_sessionmaker[AsyncSession], offset: int, rows: int = 10
) -> tuple[int, list[DeadRow]]:
    total, jobs = await lanes.dead(offset, rows)
    async with reading(sessionmaker) as session:
        info = await rooms_info(session, sorted({job.room for job in jobs if job.room}))
    return total, [DeadRow(job, info[job.room].label if job.room in info else "") for job in jobs]
