"""What Redis holds of an admin's change, derived from the database after the commit: the
lanes' pause of a room, its ceiling, a player's lane weight.

The database is the record and is written first, in the command's transaction; the lanes
follow it. They are set from what the database holds when they are set, never from the
command's own arguments, so that:

- a process that died between the commit and the lanes' write is made good by the command's
  next delivery (which applies nothing again: `audit.first_time`), without undoing a later
  command: the database holds the later one's value by then;
- two changes committed by two processes at once leave the lanes as the later commit says:
  each writer reads the record again after its write and writes again until what it wrote is
  what the record holds (`converge`); whichever write lands last was read after both commits.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Final, TypeVar

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from codemojex.db import reading, store
from codemojex.lanes import Lanes

log = logging.getLogger(__name__)

T = TypeVar("T")

# Rounds of write-then-read-again: each one needs a change committed meanwhile, so more than a
# few means a storm of admin commands on one thing; the last write then stands until the next.
CONVERGE_ROUNDS: Final = 5


async def converge(read: Callable[[], Awaitable[T]], write: Callable[[T], Awaitable[None]]) -> T:
    """Write what `read` (the database) says, then read again, until the two agree: the value
    written last."""
    value = await read()
    for _ in range(CONVERGE_ROUNDS):
        await write(value)
        again = await read()
        if again == value:
            return value
        value = again
    log.info("a derived value kept changing under its write: the last one stands")
    return value


async def pause(sessions: async_sessionmaker[AsyncSession], lanes: Lanes, room_id: str) -> bool:
    """The room's pause in the lanes, as its row says: whether paused."""

    async def read() -> bool:
        async with reading(sessions) as session:
            room = await store.get_room(session, room_id)
        return room is not None and room.paused

    async def write(paused: bool) -> None:
        await (lanes.pause(room_id) if paused else lanes.resume(room_id))

    return await converge(read, write)


async def ceiling(
    sessions: async_sessionmaker[AsyncSession], lanes: Lanes, room_id: str
) -> int | None:
    """The room's ceiling in the lanes, as its row says (None: no such room, nothing set)."""

    async def read() -> int | None:
        async with reading(sessions) as session:
            room = await store.get_room(session, room_id)
        return None if room is None else room.ceiling

    async def write(value: int | None) -> None:
        if value is not None:
            await lanes.limit(room_id, value)

    return await converge(read, write)


async def weight(
    sessions: async_sessionmaker[AsyncSession], lanes: Lanes, player_id: str
) -> int | None:
    """The player's lane weight in the lanes, as their row says (None: never set, the lanes
    keep theirs)."""

    async def read() -> int | None:
        async with reading(sessions) as session:
            player = await store.get_player(session, player_id)
        return None if player is None else player.weight

    async def write(value: int | None) -> None:
        if value is not None:
            await lanes.weight(player_id, value)

    return await converge(read, write)
