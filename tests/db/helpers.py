"""Small builders shared by the store tests."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from codemojex import ids
from codemojex.db import Room, store
from tests.support import wrong_guess

__all__ = ["job_id", "new_room", "wrong_guess"]


async def new_room(session: AsyncSession, chat_id: int = -1001, title: str = "Room") -> Room:
    return await store.ensure_room(session, chat_id, title, default_ceiling=2, round_timeout_s=600)


def job_id() -> str:
    return ids.mint(ids.JOB)
