"""The unit of work (`db/unit.py`) and the read (`db/reading.py`), on the real Postgres
through the migrations and on SQLite: a unit keeps everything its block wrote when the block
ends and nothing when it raises, on a session or a connection, and hands over the engine's
backend; a read keeps nothing, whatever is written in it."""

from __future__ import annotations

import contextlib

import pytest
from sqlalchemy import func, insert, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from codemojex.db import AuditLog, reading
from codemojex.db.engine import backend_of
from codemojex.db.store import admin
from codemojex.db.unit import uow


class _Refused(Exception):
    """Raised inside a unit: it keeps nothing."""


@pytest.fixture(params=["postgres", "sqlite"])
def dbs(request: pytest.FixtureRequest) -> async_sessionmaker[AsyncSession]:
    name = "sessions" if request.param == "postgres" else "sqlite_sessions"
    sessions: async_sessionmaker[AsyncSession] = request.getfixturevalue(name)
    return sessions


async def _audited(sessions: async_sessionmaker[AsyncSession]) -> list[str]:
    async with reading(sessions) as session:
        return list((await session.scalars(select(AuditLog.action).order_by(AuditLog.id))).all())


async def _audit(session: AsyncSession, action: str) -> None:
    await admin.audit(session, room_id=None, actor_tg_id=1, action=action, allowed=True)


async def test_a_unit_keeps_all_when_its_block_ends_and_nothing_when_it_raises(
    dbs: async_sessionmaker[AsyncSession],
) -> None:
    async with dbs() as session:
        with pytest.raises(_Refused):
            async with uow(session):
                await _audit(session, "first")
                await session.flush()  # written, not yet kept
                await _audit(session, "second")
                raise _Refused
        assert not session.in_transaction()
        assert await _audited(dbs) == []
        async with uow(session):
            await _audit(session, "first")
            await _audit(session, "second")
        assert not session.in_transaction()
    assert await _audited(dbs) == ["first", "second"]


async def test_a_unit_on_a_connection_hands_over_the_engines_backend(
    dbs: async_sessionmaker[AsyncSession],
) -> None:
    engine = dbs.kw["bind"]
    async with engine.connect() as conn:
        for keep in (False, True):
            with contextlib.suppress(_Refused):
                async with uow(conn) as tx:
                    assert tx.conn is conn and tx.backend is backend_of(conn)
                    await conn.execute(
                        insert(AuditLog).values(action="kept" if keep else "dropped", allowed=True)
                    )
                    if not keep:
                        raise _Refused
            assert not conn.in_transaction()
    assert await _audited(dbs) == ["kept"]


async def test_a_read_keeps_nothing_written_in_it(dbs: async_sessionmaker[AsyncSession]) -> None:
    async with reading(dbs) as session:
        await _audit(session, "read")
        await session.flush()
        assert await session.scalar(select(func.count()).select_from(AuditLog)) == 1
    assert await _audited(dbs) == []
