"""Small builders shared by the store tests."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from codemojex import ids
from codemojex.db import Room, store


async def new_room(session: AsyncSession, chat_id: int = -1001, title: str = "Room") -> Room:
    return await store.ensure_room(session, chat_id, title, default_ceiling=2, round_timeout_s=600)


def job_id() -> str:
    return ids.mint(ids.JOB)


def wrong_guess(secret: tuple[str, ...], palette: tuple[str, ...]) -> tuple[str, ...]:
    """A guess that is not all exact: the first position changed."""
    other = next(e for e in palette if e != secret[0])
    return (other, *secret[1:])
