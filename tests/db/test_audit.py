"""The audit log does not grow without bound: rows past their keep time are trimmed by the
workers, a bounded batch at a time. (Refused attempts are written only within their sender's
answer budget: tests/bot/test_admin.py.)"""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from codemojex import usecases
from codemojex.db import AuditLog
from codemojex.db.engine import Sessions
from codemojex.values.clock import utcnow
from codemojex.worker.retention import AuditTrim


async def _room(sessions: Sessions, chat_id: int) -> str:
    room = await usecases.ensure_room(
        sessions, chat_id, "r", default_ceiling=2, round_timeout_s=600
    )
    return room.id


async def _count(sessions: async_sessionmaker[AsyncSession], **where: object) -> int:
    stmt = select(func.count()).select_from(AuditLog).filter_by(**where)
    async with sessions() as session:
        return int((await session.execute(stmt)).scalar_one())


async def test_rows_past_their_keep_time_are_trimmed_in_batches(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    now = utcnow()
    async with sessions() as session:
        room = await _room(sessions, -3)
        for i in range(25):
            row = await usecases.audit(
                sessions, room_id=room, actor_tg_id=i, action="ban", allowed=i % 2 == 0
            )
            # 10 recent rows; 15 from 31 to 45 days ago
            age = timedelta(days=31 + i) if i < 15 else timedelta(hours=i)
            await session.execute(
                update(AuditLog).where(AuditLog.id == row.id).values(at=now - age)
            )
        await session.commit()

    clock = [1000.0]
    trim = AuditTrim(30, batch=6, every_s=60, clock=lambda: clock[0])
    assert await trim.tick(sessions) == 6  # a full batch: the next is due at once
    assert await trim.tick(sessions) == 6
    assert await trim.tick(sessions) == 3  # the last of the backlog: next look in 60 s
    assert await trim.tick(sessions) == 0
    clock[0] += 59
    assert await trim.tick(sessions) == 0
    assert await _count(sessions) == 10
    async with sessions() as session:
        oldest = (await session.execute(select(func.min(AuditLog.at)))).scalar_one()
    assert oldest > now - timedelta(days=30)
    # Past the pause it looks again (and finds nothing left to trim).
    clock[0] += 2
    assert await trim.tick(sessions) == 0
    assert await _count(sessions) == 10
