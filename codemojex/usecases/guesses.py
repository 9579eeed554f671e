"""Recording guesses, many at once (the score worker's batch): load what the game needs under
the rounds' locks through the store, let `codemojex.game.decide` decide, write the decision
through the store, in ONE transaction opened here (`db/store/batch.py` says why it is safe, and
`batch_pg.py` why it is fast).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from codemojex.db.models import utcnow
from codemojex.db.store.batch import batch_store
from codemojex.db.store.seats import Seat, by_lane
from codemojex.game.decide import decide
from codemojex.values.batch import Attempt, Verdict


async def record_guesses(
    db: AsyncSession | AsyncConnection,
    attempts: Sequence[Attempt],
    *,
    seats: Sequence[Seat] = (),
    now: datetime | None = None,
    share: bool = False,
) -> list[Verdict]:
    """Decide and record a batch of guesses in ONE transaction, with their players' rows
    (`seats`: written if new, renamed if named anew, see `db/store/seats.py`), outbox rows and
    leaderboard changes: one verdict per attempt, in order (see `codemojex.game.decide`;
    `share`: daily cards carry a Share button, inline mode being on). An attempt whose lane
    has a seat is recorded as the player of the seat's (room, user).
    Idempotent per guess id: recording a batch again changes nothing and reports duplicates.
    `db` is a session or a connection (the score worker's flush holds one), outside a
    transaction; the transaction is committed, or rolled back on a failure."""
    if not attempts:
        return []
    now = now or utcnow()
    lanes = by_lane(seats)
    for attempt in (1, 2):
        try:
            conn = db if isinstance(db, AsyncConnection) else await db.connection()
            batch = batch_store(conn)
            state, mapped = await batch.load(conn, attempts, lanes, now)
            decision = decide(mapped, state, now, share=share)
            await batch.write(conn, decision)
            await db.commit()
            return decision.verdicts
        except IntegrityError:
            # A copy of one of these jobs, delivered twice at once, committed first. At READ
            # COMMITTED the lookup after the round's lock already sees it; a snapshot older
            # than its commit (a database whose default isolation is REPEATABLE READ) does
            # not, and inserts the same guess id. The second go finds it: a duplicate.
            await db.rollback()
            if attempt == 2:
                raise
        except BaseException:
            await db.rollback()
            raise
    raise AssertionError("unreachable")
