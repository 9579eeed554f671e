"""Rooms and players: get-or-create on first sight, lookups, and a room's settings."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypeVar

from sqlalchemy import Select, and_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from codemojex import limits
from codemojex.db.engine import READ_ONLY
from codemojex.db.models import Ban, Player, Room, Round
from codemojex.db.store.errors import UnknownRoom


async def ensure_room(
    session: AsyncSession,
    chat_id: int,
    title: str,
    *,
    default_ceiling: int,
    round_timeout_s: int,
    thread_id: int = 0,
) -> Room:
    """The room of a Telegram chat (of one forum topic of it: `thread_id`, 0 for none), created
    with the defaults on first sight (title kept fresh)."""
    stmt = (
        select(Room)
        .where(Room.chat_id == chat_id, Room.thread_id == thread_id)
        .execution_options(populate_existing=True)
    )
    room = (await session.execute(stmt)).scalar_one_or_none()
    if room is None:
        room = Room(
            chat_id=chat_id,
            thread_id=thread_id,
            title=title[:255],
            length=limits.LENGTH_DEFAULT,
            palette=None,
            palette_size=limits.PALETTE_SIZE_DEFAULT,
            ceiling=default_ceiling,
            round_timeout_s=round_timeout_s,
        )
        try:
            # A savepoint: losing the race must not expire what the caller holds.
            async with session.begin_nested():
                session.add(room)
        except IntegrityError:
            # Created concurrently by another process: theirs is the room.
            room = (await session.execute(stmt)).scalar_one()
        await session.commit()
        return room
    if title and room.title != title[:255]:
        room.title = title[:255]
    await session.commit()
    return room


async def ensure_player(
    session: AsyncSession,
    room_id: str,
    tg_user_id: int,
    display_name: str,
    *,
    player_id: str | None = None,
) -> Player:
    """The player of a Telegram user in a room, created on first sight (name kept fresh). A
    new player gets `player_id` when given (the id the bot's lanes already use for the
    user); an existing one keeps its own."""
    stmt = (
        select(Player)
        .where(Player.room_id == room_id, Player.tg_user_id == tg_user_id)
        .execution_options(populate_existing=True)
    )
    player = (await session.execute(stmt)).scalar_one_or_none()
    name = display_name[:255]
    if player is None:
        player = Player(room_id=room_id, tg_user_id=tg_user_id, display_name=name)
        if player_id is not None:
            player.id = player_id
        try:
            async with session.begin_nested():
                session.add(player)
        except IntegrityError:
            found = (await session.execute(stmt)).scalar_one_or_none()
            await session.commit()
            if found is None:  # not a race: the room does not exist
                raise UnknownRoom(room_id) from None
            return found
        await session.commit()
        return player
    if name and player.display_name != name:
        player.display_name = name
    await session.commit()
    return player


_Row = TypeVar("_Row")


async def _fresh_one(session: AsyncSession, stmt: Select[_Row]) -> _Row | None:
    """One row read anew from the database (not the session's cached copy); the read's
    transaction ends at once, since on SQLite an open one holds the write lock."""
    row = (await session.execute(stmt.execution_options(populate_existing=True))).scalar()
    await session.commit()
    return row


async def get_room(session: AsyncSession, room_id: str) -> Room | None:
    return await _fresh_one(session, select(Room).where(Room.id == room_id))


async def room_by_chat(session: AsyncSession, chat_id: int, thread_id: int = 0) -> Room | None:
    """The room of a chat, or of one forum topic of it (`thread_id`)."""
    stmt = select(Room).where(Room.chat_id == chat_id, Room.thread_id == thread_id)
    return await _fresh_one(session, stmt)


async def get_player(session: AsyncSession, player_id: str) -> Player | None:
    return await _fresh_one(session, select(Player).where(Player.id == player_id))


@dataclass(frozen=True, slots=True)
class RoomCard:
    """What taking a guess in a room needs, as the database has it: the room, its open
    round, its players' ids (Telegram user -> player) and its banned users."""

    room: Room
    open_round: Round | None
    seats: dict[int, str]
    banned: frozenset[int]


async def room_card(session: AsyncSession, room_id: str) -> RoomCard | None:
    """The room's card (None: no such room), read in one transaction: the bot keeps it in
    Redis (codemojex.posting.cards) and reads it from here when Redis has lost it."""
    if not session.in_transaction():
        # a read alone: on SQLite it waits for no writer (the worker's group commits)
        await session.connection(execution_options={READ_ONLY: True})
    try:
        row = (
            await session.execute(
                select(Room, Round)
                .outerjoin(Round, and_(Round.room_id == Room.id, Round.ended_at.is_(None)))
                .where(Room.id == room_id)
                .execution_options(populate_existing=True)
            )
        ).first()
        seats = await session.execute(
            select(Player.tg_user_id, Player.id).where(Player.room_id == room_id)
        )
        banned = await session.execute(
            select(Player.tg_user_id)
            .join(Ban, and_(Ban.player_id == Player.id, Ban.room_id == Player.room_id))
            .where(Ban.room_id == room_id)
        )
        card = None
        if row is not None:
            card = RoomCard(
                room=row[0],
                open_round=row[1],
                seats={int(tg): str(pid) for tg, pid in seats},
                banned=frozenset(int(tg) for tg in banned.scalars()),
            )
    except BaseException:
        await session.rollback()
        raise
    await session.commit()
    return card


@dataclass(frozen=True, slots=True)
class SettingsChange:
    """New values of a room's settings (None: unchanged), validated by the caller."""

    length: int | None = None
    palette: tuple[str, ...] | None = None
    repeats: bool | None = None
    language: str | None = None
    ceiling: int | None = None
    round_timeout_s: int | None = None


async def lock_room(session: AsyncSession, room_id: str) -> Room | None:
    """The room, read fresh and locked against a concurrent change of its settings (FOR NO KEY
    UPDATE: rows that only reference it are not held up), in the caller's transaction."""
    return (
        await session.execute(
            select(Room)
            .where(Room.id == room_id)
            .with_for_update(key_share=True)
            .execution_options(populate_existing=True)
        )
    ).scalar_one_or_none()


def change_settings(room: Room, change: SettingsChange) -> None:
    """Write the change into the locked room (with the caller's commit)."""
    if change.length is not None:
        room.length = change.length
    if change.repeats is not None:
        room.repeats = change.repeats
    if change.language is not None:
        room.language = change.language
    if change.palette is not None:
        room.palette = "".join(change.palette)
    if change.ceiling is not None:
        room.ceiling = change.ceiling
    if change.round_timeout_s is not None:
        room.round_timeout_s = change.round_timeout_s


async def room_chats(session: AsyncSession, room_ids: Iterable[str]) -> list[int]:
    """The chats of these rooms."""
    stmt = select(Room.chat_id).where(Room.id.in_(list(room_ids)))
    chats = [int(c) for c in (await session.execute(stmt)).scalars()]
    await session.commit()
    return chats
