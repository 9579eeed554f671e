"""Rooms and players as the bot sees them: get-or-create, and every room's ceiling in the lanes."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession
from telegram import Chat, User

from codemojex.bot.context import BotServices
from codemojex.db import Room, store

NAME_MAX = 64


def storable(text: str) -> str:
    """User text as Postgres can store it: text columns refuse NUL, and UTF-8 has no lone
    surrogates (an update's JSON can carry both)."""
    return text.replace("\x00", "").encode("utf-8", "replace").decode("utf-8")


def display_name(user: User) -> str:
    name = " ".join(user.full_name.split()) or (user.username or "") or f"player {user.id}"
    return storable(name[:NAME_MAX])


async def ensure_room(services: BotServices, session: AsyncSession, chat: Chat) -> Room:
    """The chat's room, created on first sight; its ceiling is (re)applied to the lanes once
    per process, so every room has one, even after Redis lost its data."""
    room = await store.ensure_room(
        session,
        chat.id,
        room_title(chat),
        default_ceiling=services.settings.default_ceiling,
        round_timeout_s=services.settings.round_timeout_s,
    )
    await apply_ceiling(services, room)
    return room


def room_title(chat: Chat) -> str:
    return storable((chat.title or "")[:255])


async def apply_ceiling(services: BotServices, room: Room) -> None:
    """Set the room's ceiling on the lanes, once per process."""
    if room.id not in services.ceilings_applied:
        await services.lanes.limit(room.id, room.ceiling)
        services.ceilings_applied.add(room.id)
