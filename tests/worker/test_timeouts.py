"""A held row lock costs the worker seconds, never its whole wait: its sessions have a
`lock_timeout` (and a `statement_timeout`, engine.DB_*), a statement cut by one is a
Postgres outage (outages.py), and the score worker's retry (RETRIES.record) records the batch
once the lock is gone. The lock is held by the test's own Postgres session, as a worker that
died mid-transaction, or an admin's session left open, would hold it.

Also: a session frozen inside a transaction is ended by Postgres (idle in transaction), and a
server that stops answering fails a statement through asyncpg's own bound."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import pytest
import redis.asyncio as aioredis
from sqlalchemy import event, select, text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from codemojex import usecases
from codemojex.db import Guess, make_engine
from codemojex.db.engine import (
    DB_IDLE_IN_TRANSACTION_MS,
    DB_LOCK_TIMEOUT_MS,
    DB_MAINTENANCE_LOCK_TIMEOUT_MS,
    DB_MAINTENANCE_STATEMENT_TIMEOUT_MS,
    DB_STATEMENT_TIMEOUT_MS,
    make_migration_engine,
)
from codemojex.db.unit import MAINTENANCE
from codemojex.lanes import Lanes
from codemojex.outages import OUTAGES, outage_of
from codemojex.standin import StandIn
from codemojex.values.clock import utcnow
from codemojex.worker.score import ScoreWorker
from tests.worker.conftest import enqueue_guess, make_table

LOCK_S = DB_LOCK_TIMEOUT_MS / 1000
TIMEOUTS = ("lock_timeout", "statement_timeout", "idle_in_transaction_session_timeout")


def asyncpg_url(url: str) -> str:
    return url.replace("postgresql+asyncpg://", "postgresql://")


async def test_a_round_locked_by_another_session_is_recorded_once_the_lock_goes(
    redis_r: aioredis.Redis,
    queue_name: str,
    worker_pg_url: str,
    sessionmaker: async_sessionmaker[AsyncSession],
    standin: StandIn,
) -> None:
    lanes = Lanes(redis_r, queue=queue_name)
    table = await make_table(sessionmaker, standin, -1101)
    player = next(iter(table.players))
    job_id = await enqueue_guess(lanes, standin, table, player, table.wrong_guess())
    batch = await lanes.wclaim(10_000)
    worker = ScoreWorker(sessionmaker)
    held_s = LOCK_S + 1.5  # past one lock timeout, within the worker's hold

    holder = await asyncpg.connect(asyncpg_url(worker_pg_url))
    try:
        locked = holder.transaction()
        await locked.start()
        await holder.execute("SELECT id FROM rounds WHERE id = $1 FOR UPDATE", table.round_id)
        began = time.monotonic()
        recording = asyncio.create_task(worker(batch))
        # The flush waits for the lock, and fails at its lock_timeout: a Postgres outage,
        # retried, not a bug and not a wait as long as the holder's.
        while OUTAGES.retried["record_guesses"] == 0:
            assert time.monotonic() - began < LOCK_S + 2.0, "no lock timeout"
            assert not recording.done()
            await asyncio.sleep(0.05)
        assert time.monotonic() - began >= LOCK_S - 0.2
        assert OUTAGES.is_open("postgres")
        await asyncio.sleep(max(0.0, held_s - (time.monotonic() - began)))
        await locked.rollback()
    finally:
        await holder.close()
    released = time.monotonic()
    await asyncio.wait_for(recording, LOCK_S + 5)
    assert time.monotonic() - released < LOCK_S + 1.0  # the retry waiting when it went
    assert await lanes.ack_many(batch) == 1
    async with sessionmaker() as session:
        recorded = select(Guess.id).where(Guess.id == job_id)
        assert list((await session.execute(recorded)).scalars()) == [job_id]
    assert worker.stats.scored == 1 and worker.stats.retries == 0
    assert not OUTAGES.is_open("postgres")


async def test_a_statement_past_its_timeout_is_an_outage(worker_pg_url: str) -> None:
    engine = make_engine(worker_pg_url)
    try:
        async with engine.connect() as conn:
            shown = {name: (await conn.execute(text(f"SHOW {name}"))).scalar() for name in TIMEOUTS}
            assert shown == {
                "lock_timeout": f"{DB_LOCK_TIMEOUT_MS // 1000}s",
                "statement_timeout": f"{DB_STATEMENT_TIMEOUT_MS // 1000}s",
                "idle_in_transaction_session_timeout": (f"{DB_IDLE_IN_TRANSACTION_MS // 1000}s"),
            }
            began = time.monotonic()
            with pytest.raises(Exception) as cut:
                await conn.execute(text("SELECT pg_sleep(60)"))
            took = time.monotonic() - began
            assert outage_of(cut.value) == "postgres", repr(cut.value)
            assert took < DB_STATEMENT_TIMEOUT_MS / 1000 + 2.0
    finally:
        await engine.dispose()


async def test_a_maintenance_transaction_runs_under_its_own_bounds(worker_pg_url: str) -> None:
    """The retention trims (`uow(..., maintenance=True)`) are no hot path: their transaction
    has the maintenance bounds, and the connection goes back to the pool with the hot path's."""
    engine = make_engine(worker_pg_url, pool_size=1, max_overflow=0)
    try:
        async with engine.connect() as conn:
            await conn.execution_options(**{MAINTENANCE: True})
            async with conn.begin():
                timeout = (await conn.execute(text("SHOW statement_timeout"))).scalar()
                lock = (await conn.execute(text("SHOW lock_timeout"))).scalar()
        assert timeout == f"{DB_MAINTENANCE_STATEMENT_TIMEOUT_MS // 1000}s"
        assert lock == f"{DB_MAINTENANCE_LOCK_TIMEOUT_MS // 1000}s"
        async with engine.connect() as conn:  # the same connection, out of the pool
            timeout = (await conn.execute(text("SHOW statement_timeout"))).scalar()
        assert timeout == f"{DB_STATEMENT_TIMEOUT_MS // 1000}s"
    finally:
        await engine.dispose()


async def test_a_session_frozen_in_a_transaction_gives_its_locks_back(
    worker_pg_url: str, sessionmaker: async_sessionmaker[AsyncSession], standin: StandIn
) -> None:
    """A client that stops mid-transaction (its process frozen, its host gone) holds its row
    locks only until Postgres ends the session (idle_in_transaction_session_timeout); the
    next one to want them gets them."""
    table = await make_table(sessionmaker, standin, -1102)
    engine = make_engine(worker_pg_url, connect_args={"server_settings": {
        "idle_in_transaction_session_timeout": "1500"}})  # fmt: skip
    try:
        async with engine.connect() as frozen:
            await frozen.execute(
                text("SELECT id FROM rounds WHERE id = :id FOR UPDATE"), {"id": table.round_id}
            )
            began = time.monotonic()
            async with sessionmaker() as session:  # waits for the lock, then gets it
                await session.execute(
                    text("SELECT id FROM rounds WHERE id = :id FOR UPDATE"),
                    {"id": table.round_id},
                )
                await session.rollback()
            assert 1.0 <= time.monotonic() - began < LOCK_S
            with pytest.raises(Exception) as ended:
                await frozen.execute(text("SELECT 1"))
            assert outage_of(ended.value) == "postgres", repr(ended.value)
    finally:
        await engine.dispose()


@pytest.mark.skipif(os.geteuid() != 0, reason="signals another user's process (a backend)")
async def test_a_server_that_stops_answering_fails_a_statement(worker_pg_url: str) -> None:
    """Our session's backend frozen (SIGSTOP; only it, never the server): it sends no
    statement timeout, so asyncpg's own bound (`command_timeout`, a margin past the longest
    statement timeout) ends the wait as a Postgres outage, and the pool goes on."""
    margin = 0.5
    engine = make_engine(
        worker_pg_url, pool_size=1, max_overflow=0, connect_args={"command_timeout": margin}
    )
    assert urlsplit(worker_pg_url).hostname in ("127.0.0.1", "localhost")  # our own machine
    try:
        async with engine.connect() as conn:
            pid = (await conn.execute(text("SELECT pg_backend_pid()"))).scalar()
            await conn.commit()
            assert isinstance(pid, int)
            os.kill(pid, signal.SIGSTOP)
            try:
                began = time.monotonic()
                with pytest.raises(Exception) as hung:
                    await asyncio.wait_for(conn.execute(text("SELECT 1")), 30)
                assert outage_of(hung.value) == "postgres", repr(hung.value)
                assert time.monotonic() - began < margin + 5
            finally:
                os.kill(pid, signal.SIGCONT)
        async with engine.connect() as conn:  # the pool goes on: a new connection answers
            assert (await conn.execute(text("SELECT 1"))).scalar() == 1
    finally:
        await engine.dispose()


async def test_the_trims_and_the_migrations_are_not_cut_by_the_hot_paths_timeouts(
    worker_pg_url: str, sessionmaker: async_sessionmaker[AsyncSession]
) -> None:
    """A retention trim's statements run under the maintenance bounds (read inside its own
    transaction), the migrations' engine under none."""
    engine = sessionmaker.kw["bind"]
    seen: list[str] = []

    @event.listens_for(engine.sync_engine, "after_cursor_execute")
    def _after(conn: Any, _c: Any, statement: str, _p: Any, _x: Any, _m: bool) -> None:
        if "audit_log" in statement and not seen:
            seen.append(str(conn.exec_driver_sql("SHOW statement_timeout").scalar()))

    try:
        assert await usecases.trim_audit(sessionmaker, utcnow(), 10) == 0
    finally:
        event.remove(engine.sync_engine, "after_cursor_execute", _after)
    assert seen == [f"{DB_MAINTENANCE_STATEMENT_TIMEOUT_MS // 1000}s"]

    migrations = make_migration_engine(worker_pg_url)
    try:
        async with migrations.connect() as conn:
            for name in (
                "statement_timeout",
                "lock_timeout",
                "idle_in_transaction_session_timeout",
            ):
                assert (await conn.execute(text(f"SHOW {name}"))).scalar() == "0"
    finally:
        await migrations.dispose()
