"""The unit of work: one transaction as a context manager, and the only place that commits or
rolls back.

A use-case opens one for each transaction it makes (`async with uow(session) as tx:`): the store
functions it calls inside only load, lock and write, and the block's end commits everything at
once, or, when the block raises, rolls it all back. `tx.conn` is the transaction's connection,
`tx.backend` the database's store backend (`store.backend.Backend`, picked once where the engine
was built, `engine.py`), for the statements that differ between Postgres and SQLite.

The use-cases open units (`codemojex.usecases`), and the outbox sender for its books
(`posting/sender/delivery.py`); the bot, the worker and the ops page never do (an import-linter
contract, `pyproject.toml`): they write through the use-cases, and read in a transaction that
keeps nothing (`reading.py`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from codemojex.db.engine import MAINTENANCE, backend_of
from codemojex.db.store.backend import Backend

# What a use-case is given to work on: a session (the ORM's flows) or a connection (the score
# worker's flushes keep one; the sender's books take one from the pool).
Db = AsyncSession | AsyncConnection


@dataclass(frozen=True, slots=True)
class Unit:
    """A transaction in progress: its connection and its database's backend."""

    conn: AsyncConnection
    backend: Backend


@asynccontextmanager
async def uow(db: Db, *, maintenance: bool = False) -> AsyncIterator[Unit]:
    """One transaction on `db`, committed when the block ends and rolled back when it raises
    (the commit's own failure included). It is the transaction `db` is in: begun here, or by a
    read made on the same session just before (the tests read and write on one session).
    `maintenance`: a transaction of no hot path (the retention trims), begun here, which runs
    under the maintenance bounds instead of the hot path's statement and lock timeouts
    (`engine.MAINTENANCE`)."""
    options = {MAINTENANCE: True} if maintenance else {}
    if isinstance(db, AsyncSession):
        conn = await db.connection(execution_options=options or None)
    else:
        conn = await db.execution_options(**options) if options else db
    try:
        yield Unit(conn, backend_of(conn))
        await db.commit()
    except BaseException:
        await db.rollback()
        raise
