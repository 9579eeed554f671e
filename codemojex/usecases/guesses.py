"""Recording guesses, many at once (the score worker's batch): load what the game needs under
the rounds' locks through the store's backend, let `codemojex.game.decide` decide, write the
decision through the backend, in ONE transaction opened here (`db/store/backend.py` says why it
is safe, and `db/store/postgres.py` why it is fast).

The "too late" lines of a batch spend their members' answer budgets (`late_budget`, the
worker's `AnswerBudget.spend_many`: one Redis call for the batch, only when it has such lines)
between the decision and its write, so that what is written is what the budgets allow. The
call is the transaction's only I/O outside the database, bounded in time by its caller. A
batch decided again (a duplicate key's retry below, a group commit redone one batch at a time)
spends again: a budget is a ceiling, and spending it twice only ever says less.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime

from sqlalchemy.exc import IntegrityError

from codemojex.db.engine import Sessions, backend_of
from codemojex.db.store.seats import Seat, by_lane
from codemojex.db.unit import uow
from codemojex.game.decide import decide, late_lines, within_budget
from codemojex.values.batch import Attempt, BatchState, Decision, Verdict
from codemojex.values.clock import utcnow
from codemojex.values.types import Say

# Spends one answer of each (chat, Telegram user), in order: what each line may say.
LateBudget = Callable[[Sequence[tuple[int, int]]], Awaitable[Sequence[Say]]]


async def record_guesses(
    sessions: Sessions,
    attempts: Sequence[Attempt],
    *,
    seats: Sequence[Seat] = (),
    now: datetime | None = None,
    share: bool = False,
    late_budget: LateBudget | None = None,
) -> list[Verdict]:
    """Decide and record a batch of guesses in ONE transaction, with their players' rows
    (`seats`: written if new, renamed if named anew, see `db/store/seats.py`), outbox rows and
    leaderboard changes: one verdict per attempt, in order (see `codemojex.game.decide`;
    `share`: daily cards carry a Share button, inline mode being on). An attempt whose lane
    has a seat is recorded as the player of the seat's (room, user). `late_budget`: the "too
    late" lines are posted as their members' answer budgets allow (None: all of them).
    Idempotent per guess id: recording a batch again changes nothing and reports duplicates.
    The transaction is committed, or rolled back on a failure."""
    if not attempts:
        return []
    now = now or utcnow()
    lanes = by_lane(seats)
    members = {a.guess_id: lanes[a.player_id].tg_user_id for a in attempts if a.player_id in lanes}
    for attempt in (1, 2):
        try:
            async with uow(sessions) as tx:
                backend = backend_of(tx.conn)
                state, mapped = await backend.load_batch(tx, attempts, lanes, now)
                decision = decide(mapped, state, now, share=share)
                if late_budget is not None:
                    decision = await _budgeted(decision, state, members, late_budget)
                await backend.write_batch(tx, decision)
            return decision.verdicts
        except IntegrityError:
            # A copy of one of these jobs, delivered twice at once, committed first. At READ
            # COMMITTED the lookup after the round's lock already sees it; a snapshot older
            # than its commit (a database whose default isolation is REPEATABLE READ) does
            # not, and inserts the same guess id. The second go finds it: a duplicate.
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


async def _budgeted(
    decision: Decision, state: BatchState, members: Mapping[str, int], budget: LateBudget
) -> Decision:
    """The decision with its "too late" lines as their members' budgets allow."""
    lines = [m for m in late_lines(decision) if m.guess_id in members]
    if not lines:
        return decision
    ids = [m.guess_id or "" for m in lines]
    said = await budget([(m.chat_id, members[i]) for m, i in zip(lines, ids, strict=True)])
    return within_budget(decision, state, dict(zip(ids, said, strict=True)))
