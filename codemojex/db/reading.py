"""A read: a session whose transaction writes nothing, for whoever only reads (the bot's boards
and lookups, the worker's round timer, the operators' pages, the room cards' reload):
`async with reading(sessions) as session: await store.leaderboard(session, ...)`.

Its transaction begins as a reader's (on SQLite DEFERRED: it waits for no writer and holds none
up, see `engine.py`) and ends with the block, keeping nothing: the session is closed and its
connection goes back to the pool rolled back. What was read stays readable after it (detached,
as loaded). A write is a use-case's, in a unit of work (`unit.py`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from codemojex.db.engine import READ_ONLY


@asynccontextmanager
async def reading(sessions: async_sessionmaker[AsyncSession]) -> AsyncIterator[AsyncSession]:
    """A session to read with, in one transaction that ends with the block and keeps nothing."""
    async with sessions() as session:
        await session.connection(execution_options={READ_ONLY: True})
        yield session
