"""Recording a batch of guesses, as the store sees it: LOAD what the game needs under the
rounds' locks, then WRITE what the game decided, in the caller's transaction
(`codemojex.usecases.guesses` opens it, calls `codemojex.game.decide` in between, commits).
One interface, `BatchStore`, one implementation per database: `batch_pg` (fixed statements over
arrays, a handful of round trips whatever the batch's size) and `batch_portable` (SQLite, the
embedded demo: portable Core statements). `batch_store(conn)` picks the connection's.

Why it is safe: the rounds of the batch are locked first (FOR NO KEY UPDATE, in id order, so two
workers recording overlapping batches never deadlock), so the guesses of one round are decided
one transaction after another and the first all-exact guess is its only winner; everything else
is read after the lock, so it includes what the previous holder wrote. The guess id (the lane
job id) is the primary key, so a re-delivered job finds its own row and changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Protocol

from sqlalchemy.ext.asyncio import AsyncConnection

from codemojex.db.store.batch_pg import PG
from codemojex.db.store.batch_portable import PORTABLE
from codemojex.db.store.seats import Seat
from codemojex.values.batch import Attempt, BatchState, Decision


class BatchStore(Protocol):
    """Loading and writing a batch on one kind of database (in the caller's transaction)."""

    async def load(
        self,
        conn: AsyncConnection,
        attempts: Sequence[Attempt],
        seats: Mapping[str, Seat],
        now: datetime,
    ) -> tuple[BatchState, list[Attempt]]:
        """Lock the batch's rounds, write the players the jobs name (`seats`, by lane: new ones
        under their lane's id, renamed ones renamed) and read what deciding needs: the state,
        and the attempts as their players' (an attempt whose lane has a seat is the player's of
        the seat's (room, user))."""
        ...

    async def write(self, conn: AsyncConnection, decision: Decision) -> None:
        """Write what `decide` decided: guess rows, leaderboard changes, closed rounds, outbox
        rows and the daily rounds' progress (under the rounds' locks)."""
        ...


def batch_store(conn: AsyncConnection) -> BatchStore:
    """The connection's database's way."""
    return PG if conn.dialect.name == "postgresql" else PORTABLE
