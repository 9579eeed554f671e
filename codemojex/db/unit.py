"""The unit of work: one transaction as a context manager, and the only place that begins,
commits or rolls back one, or makes a savepoint in one.

A use-case opens one for each transaction it makes (`async with uow(sessions) as tx:`): the
unit takes a session of its own from `sessions`, begins its transaction there, and the store
functions the block calls only load, lock and write in it (`tx`); the block's end commits
everything at once or, when the block raises, rolls it all back, and the session is closed
either way. `tx.session` is the transaction's ORM session, `tx.conn` its connection
(`engine.backend_of(tx.conn)`: the database's store backend, picked once where the engine was
built, for the statements that differ between Postgres and SQLite). `tx.savepoint()` is a
part of the transaction that may fail alone (a race lost to a unique index), rolled back to
its start without the rest.

The use-cases open units (`codemojex.usecases`), and the outbox sender for its books
(`posting/sender/delivery.py`); the bot, the worker and the ops page never do (an import-linter
contract, `pyproject.toml`): they write through the use-cases, and read in a transaction that
keeps nothing (`reading.py`).

This module is the bottom of the database package: it imports none of it, so that the store's
writes, which take a `Unit`, sit above it and the engine, which picks their backend, above
them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession, async_sessionmaker

# An execution option a maintenance transaction sets (`uow(..., maintenance=True)`: the
# retention trims): on Postgres it runs under the maintenance bounds, not the hot path's
# (`engine.py`). SQLite ignores it.
MAINTENANCE = "codemojex_maintenance"


@dataclass(frozen=True, slots=True)
class Unit:
    """A transaction in progress: its session and its connection."""

    session: AsyncSession
    conn: AsyncConnection

    @asynccontextmanager
    async def savepoint(self) -> AsyncIterator[None]:
        """A savepoint: what the block wrote is kept when it ends and undone when it raises
        (the exception goes on), the rest of the transaction untouched either way."""
        async with self.session.begin_nested():
            yield


@asynccontextmanager
async def uow(
    sessions: async_sessionmaker[AsyncSession], *, maintenance: bool = False
) -> AsyncIterator[Unit]:
    """One transaction, on a session and connection of its own: begun here, committed when
    the block ends, rolled back when it raises (the commit's own failure included).
    `maintenance`: a transaction of no hot path (the retention trims), which runs under the
    maintenance bounds instead of the hot path's statement and lock timeouts
    (`MAINTENANCE`)."""
    options = {MAINTENANCE: True} if maintenance else None
    async with sessions() as session, session.begin():
        conn = await session.connection(execution_options=options)
        yield Unit(session, conn)
