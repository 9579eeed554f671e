"""The unit of work (`db/unit.py`) and the read (`db/reading.py`), on the real Postgres
through the migrations and on SQLite: a unit opens its own transaction, keeps everything its
block wrote when the block ends and nothing when it raises, on a connection that carries the
engine's backend; a savepoint inside it undoes its own part alone; a read keeps nothing, whatever is
written in it."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from codemojex.db import AuditLog, reading
from codemojex.db.engine import backend_of
from codemojex.db.store import admin
from codemojex.db.unit import Unit, uow


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


async def _audit(tx: Unit, action: str) -> None:
    await admin.audit(tx, room_id=None, actor_tg_id=1, action=action, allowed=True)


async def test_a_unit_keeps_all_when_its_block_ends_and_nothing_when_it_raises(
    dbs: async_sessionmaker[AsyncSession],
) -> None:
    with pytest.raises(_Refused):
        async with uow(dbs) as tx:
            await _audit(tx, "first")
            await tx.session.flush()  # written, not yet kept
            await _audit(tx, "second")
            raise _Refused
    assert not tx.session.in_transaction()
    assert await _audited(dbs) == []
    async with uow(dbs) as tx:
        await _audit(tx, "first")
        await _audit(tx, "second")
    assert not tx.session.in_transaction()
    assert await _audited(dbs) == ["first", "second"]


async def test_a_unit_opens_its_own_transaction_on_a_connection_with_the_engines_backend(
    dbs: async_sessionmaker[AsyncSession],
) -> None:
    async with reading(dbs) as reader:
        # A read begun on another session is not the unit's: what it sees, the unit ignores.
        assert await reader.scalar(select(func.count()).select_from(AuditLog)) == 0
        async with uow(dbs) as tx:
            assert tx.session is not reader and tx.session.in_transaction()
            assert backend_of(tx.conn) is backend_of(await reader.connection())
            await _audit(tx, "kept")
        assert reader.in_transaction()  # untouched by the unit's commit
    assert await _audited(dbs) == ["kept"]


async def test_a_savepoint_undoes_its_part_alone(dbs: async_sessionmaker[AsyncSession]) -> None:
    async with uow(dbs) as tx:
        await _audit(tx, "before")
        with pytest.raises(_Refused):
            async with tx.savepoint():
                await _audit(tx, "undone")
                await tx.session.flush()
                raise _Refused
        async with tx.savepoint():
            await _audit(tx, "kept")
    assert await _audited(dbs) == ["before", "kept"]


async def test_a_read_keeps_nothing_written_in_it(dbs: async_sessionmaker[AsyncSession]) -> None:
    async with reading(dbs) as session:
        session.add(AuditLog(action="read", allowed=True, args=""))
        await session.flush()
        assert await session.scalar(select(func.count()).select_from(AuditLog)) == 1
    assert await _audited(dbs) == []
