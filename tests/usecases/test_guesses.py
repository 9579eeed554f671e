"""usecases.record_guesses through the store's backend (`db/store/backend.py`): the database's
backend is picked once, with the engine, a batch on Postgres is a fixed number of statements
whatever its size, and load, decide, write happen in the one transaction the use-case opens."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest
import redis.asyncio as aioredis
from sqlalchemy import event, func, select, text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from codemojex import usecases
from codemojex.db import Guess, LeaderboardEntry, Outbox, make_engine, make_sessionmaker, store
from codemojex.db.engine import Sessions, backend_of
from codemojex.db.reading import reading
from codemojex.db.store.postgres import Postgres
from codemojex.db.store.seats import Seat
from codemojex.db.store.sqlite import Sqlite
from codemojex.db.unit import uow
from codemojex.game import texts
from codemojex.game.decide import decide
from codemojex.locale import EN
from codemojex.state.budget import AnswerBudget
from codemojex.values.clock import utcnow
from codemojex.values.types import Say
from tests.db.helpers import attempt, new_room, wrong_guess
from tests.helpers.sql import statements


async def _rooms_with_rounds(sessions: Sessions, rng: Any, n: int) -> list[Any]:
    out = []
    for i in range(n):
        room = await new_room(sessions, chat_id=-1000 - i, title=f"Room {i}")
        player = await usecases.ensure_player(sessions, room.id, 500 + i, f"P{i}")
        rnd = await usecases.start_round(sessions, room.id, rng)
        out.append((rnd, player.id))
    return out


async def test_the_engine_carries_its_database_backend(
    pg_engine: AsyncEngine, sqlite_sessions: async_sessionmaker[AsyncSession]
) -> None:
    async with pg_engine.connect() as conn:
        backend = backend_of(conn)
        assert isinstance(backend, Postgres)
    async with pg_engine.connect() as again:
        assert backend_of(again) is backend  # picked once, with the engine
    async with sqlite_sessions() as s:
        assert isinstance(backend_of(await s.connection()), Sqlite)


async def test_a_batch_on_postgres_is_the_same_statements_whatever_its_size(
    pg_engine: AsyncEngine, session: AsyncSession, sessions: Sessions, rng: Any
) -> None:
    played = await _rooms_with_rounds(sessions, rng, 12)

    def batch(k: int, per_round: int) -> list[Any]:
        return [
            attempt(rnd, player, wrong_guess(rnd.secret_emojis, rnd.palette_emojis, j))
            for rnd, player in played[:k]
            for j in range(per_round)
        ]

    with statements(pg_engine) as one:
        [verdict] = await usecases.record_guesses(sessions, batch(1, 1))
    assert verdict.kind == "scored"
    with statements(pg_engine) as many:
        verdicts = await usecases.record_guesses(sessions, batch(12, 3))
    assert [v.kind for v in verdicts] == ["scored"] * 36
    # the lock, the lookup, the write: no statement per guess, per round or per player
    assert len(one) == len(many) == 3
    assert (await session.scalar(select(func.count()).select_from(Guess))) == 37


async def test_a_win_adds_one_statement_and_closes_the_round(
    pg_engine: AsyncEngine, session: AsyncSession, sessions: Sessions, rng: Any
) -> None:
    [(rnd, player)] = await _rooms_with_rounds(sessions, rng, 1)
    with statements(pg_engine) as sent:
        [verdict] = await usecases.record_guesses(
            sessions, [attempt(rnd, player, rnd.secret_emojis)]
        )
    assert verdict.won and verdict.round_closed
    # the keys_off row learns the announcement it takes the keyboard off
    assert len(sent) == 4
    assert (await store.open_round(session, rnd.room_id)) is None


class _Abandoned(Exception):
    """Raised inside a unit of work: it rolls back."""


async def test_load_decide_write_is_one_transaction(
    sessions: async_sessionmaker[AsyncSession], rng: Any
) -> None:
    """The backend never commits: a batch loaded and written in a unit that raises leaves
    nothing; in one that ends, everything at once."""
    [(rnd, player)] = await _rooms_with_rounds(sessions, rng, 1)
    attempts = [attempt(rnd, player, rnd.secret_emojis)]
    for commit in (False, True):
        with contextlib.suppress(_Abandoned):
            async with uow(sessions) as tx:
                state, mapped = await backend_of(tx.conn).load_batch(tx, attempts, {}, utcnow())
                assert state.rounds[rnd.id].secret == rnd.secret_emojis
                await backend_of(tx.conn).write_batch(tx, decide(mapped, state, utcnow()))
                if not commit:
                    raise _Abandoned
        async with reading(sessions) as other:
            guesses = await other.scalar(select(func.count()).select_from(Guess))
            board = await other.scalar(select(func.count()).select_from(LeaderboardEntry))
            posts = await other.scalar(
                select(func.count()).select_from(Outbox).where(Outbox.kind == "win")
            )
        assert (guesses, board, posts) == ((1, 1, 1) if commit else (0, 0, 0))


@pytest.mark.parametrize("twice", [1, 2])
async def test_a_batch_recorded_again_changes_nothing(
    session: AsyncSession, sessions: Sessions, rng: Any, twice: int
) -> None:
    [(rnd, player)] = await _rooms_with_rounds(sessions, rng, 1)
    batch = [attempt(rnd, player, wrong_guess(rnd.secret_emojis, rnd.palette_emojis, j))
             for j in range(3)]  # fmt: skip
    first = await usecases.record_guesses(sessions, batch)
    for _ in range(twice):
        again = await usecases.record_guesses(sessions, batch)
        assert [v.kind for v in again] == ["duplicate"] * 3
        assert [v.attempt_no for v in again] == [v.attempt_no for v in first]
    assert (await session.scalar(select(func.count()).select_from(Guess))) == 3
    await session.commit()


@pytest.mark.parametrize("isolation", ["read committed", "repeatable read"])
async def test_a_copy_that_loses_the_primary_key_race_is_retried_as_a_duplicate(
    migrated_pg_url: str,
    sessions: async_sessionmaker[AsyncSession],
    rng: Any,
    isolation: str,
) -> None:
    """Two workers record the same job at once, on the real Postgres (a job delivered again
    after its first worker died: a guess sent in time, its round ended since, so it is
    "late"). Both wait on the round's lock (held here until both do), so each transaction
    has begun before either commits.

    At READ COMMITTED (the default) the loser's lookup, a statement after the lock, sees the
    winner's row: a duplicate, no conflict. On a database whose default isolation is
    REPEATABLE READ (a DBA's `ALTER DATABASE … SET default_transaction_isolation`) the
    loser's snapshot is older than the winner's commit: it inserts the same guess id and
    hits the primary key. The use-case then rolls back and goes again, and the copy is a
    duplicate: no exception, nothing counted or answered twice."""
    [(rnd, player)] = await _rooms_with_rounds(sessions, rng, 1)
    job = attempt(rnd, player, wrong_guess(rnd.secret_emojis, rnd.palette_emojis))
    round_id = rnd.id
    assert await usecases.close_round(sessions, round_id, "endround") is not None
    workers = make_engine(
        migrated_pg_url,
        connect_args={"server_settings": {"default_transaction_isolation": isolation}},
    )
    conflicts: list[str] = []

    def seen(context: Any) -> None:
        conflicts.append(type(context.original_exception).__name__)

    event.listen(workers.sync_engine, "handle_error", seen)
    try:
        async with sessions() as gate:
            await gate.execute(
                text("SELECT id FROM rounds WHERE id = :id FOR NO KEY UPDATE"), {"id": round_id}
            )
            copies = [
                asyncio.create_task(_record_alone(make_sessionmaker(workers), job))
                for _ in range(2)
            ]
            await _waiting_on_a_lock(gate, 2)
            await gate.commit()
        verdicts = await asyncio.gather(*copies)
    finally:
        await workers.dispose()

    assert sorted(v.kind for v in verdicts) == ["duplicate", "late"]
    # The race happened where it can (else this test would prove nothing about the retry).
    assert conflicts == ([] if isolation == "read committed" else ["UniqueViolationError"])
    async with sessions() as s:
        assert await s.scalar(select(func.count()).select_from(Guess)) == 1
        answers = select(func.count()).select_from(Outbox).where(Outbox.guess_id == job.guess_id)
        assert await s.scalar(answers) == 1
        entry = await s.get(LeaderboardEntry, (rnd.room_id, player))
        assert entry is None or entry.guesses == 0


async def _record_alone(sessions: async_sessionmaker[AsyncSession], item: Any) -> Any:
    [verdict] = await usecases.record_guesses(sessions, [item])
    return verdict


async def _waiting_on_a_lock(session: AsyncSession, n: int) -> None:
    """Until `n` other connections of this database wait on a lock."""
    for _ in range(200):
        # (within a transaction the activity view is read once unless told to read again)
        await session.execute(text("SELECT pg_stat_clear_snapshot()"))
        waiting = await session.scalar(
            text(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
            )
        )
        if waiting == n:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{n} connections never waited on the round's lock")


async def test_too_late_lines_spend_their_members_answer_budgets(
    session: AsyncSession, sessions: Sessions, rng: Any, real_redis: aioredis.Redis, queue_name: str
) -> None:
    """Guesses after a round ended are recorded late; their "too late" lines spend their
    members' answer budgets in the chat (the bot's answers' own, on the real Redis): a member
    gets as many lines as answers left, then "slow down" once, then nothing, and another
    member's line is not crowded out."""
    chat, ann_id, bob_id = -2001, 701, 702
    room = await new_room(sessions, chat_id=chat)
    ann = await usecases.ensure_player(sessions, room.id, ann_id, "Ann")
    bob = await usecases.ensure_player(sessions, room.id, bob_id, "Bob")
    rnd = await usecases.start_round(sessions, room.id, rng)
    await usecases.close_round(sessions, rnd.id, "endround")
    budget = AnswerBudget(real_redis, queue_name, budget=3, window_s=3600)
    assert await budget.spend(chat, ann_id) is Say.ANSWER  # the bot answered Ann once
    misses = [wrong_guess(rnd.secret_emojis, rnd.palette_emojis, j) for j in range(5)]
    late = [attempt(rnd, ann.id, miss) for miss in misses] + [attempt(rnd, bob.id, misses[0])]
    seats = [Seat(ann.id, room.id, ann_id, "Ann"), Seat(bob.id, room.id, bob_id, "Bob")]
    verdicts = await usecases.record_guesses(
        sessions, late, seats=seats, late_budget=budget.spend_many
    )
    assert [v.kind for v in verdicts] == ["late"] * 6
    rows = (
        (await session.execute(select(Outbox).where(Outbox.kind == "late").order_by(Outbox.id)))
        .scalars()
        .all()
    )
    said = {(row.guess_id, row.text) for row in rows}
    ids = [a.guess_id for a in late]
    assert said == {
        (ids[0], texts.already_over(EN, misses[0])),
        (ids[1], texts.already_over(EN, misses[1])),
        (ids[2], texts.answers_spent(EN)),
        (ids[5], texts.already_over(EN, misses[0])),
    }
    assert (await session.scalar(select(func.count()).select_from(Guess))) == 6
    # The bot has nothing more to say to her either, until her budget is whole again
    assert await budget.spend(chat, ann_id) is Say.NOTHING
    await session.commit()
