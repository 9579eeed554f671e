"""Rooms and players as a transaction writes them: get-or-create on first sight, and a room's
settings locked and changed. Parts of the caller's transaction (`codemojex.usecases`): they never
commit. Looking rooms and players up is `lookups.py`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError

from codemojex.db.models import Player, Room
from codemojex.db.store.errors import UnknownRoom
from codemojex.scoring.rules import DEFAULT_LENGTH, DEFAULT_PALETTE_SIZE

if TYPE_CHECKING:
    from codemojex.db.unit import Unit


async def ensure_room(
    tx: Unit,
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
    room = (await tx.session.execute(stmt)).scalar_one_or_none()
    if room is None:
        room = Room(
            chat_id=chat_id,
            thread_id=thread_id,
            title=title[:255],
            length=DEFAULT_LENGTH,
            palette=None,
            palette_size=DEFAULT_PALETTE_SIZE,
            ceiling=default_ceiling,
            round_timeout_s=round_timeout_s,
        )
        try:
            # A savepoint: losing the race must not expire what the caller holds.
            async with tx.savepoint():
                tx.session.add(room)
        except IntegrityError:
            # Created concurrently by another process: theirs is the room.
            room = (await tx.session.execute(stmt)).scalar_one()
        return room
    if title and room.title != title[:255]:
        room.title = title[:255]
    return room


async def ensure_player(
    tx: Unit,
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
    player = (await tx.session.execute(stmt)).scalar_one_or_none()
    name = display_name[:255]
    if player is None:
        player = Player(room_id=room_id, tg_user_id=tg_user_id, display_name=name)
        if player_id is not None:
            player.id = player_id
        try:
            async with tx.savepoint():
                tx.session.add(player)
        except IntegrityError:
            found = (await tx.session.execute(stmt)).scalar_one_or_none()
            if found is None:  # not a race: the room does not exist
                raise UnknownRoom(room_id) from None
            return found
        return player
    if name and player.display_name != name:
        player.display_name = name
    return player


@dataclass(frozen=True, slots=True)
class SettingsChange:
    """New values of a room's settings (None: unchanged), validated by the caller."""

    length: int | None = None
    palette: tuple[str, ...] | None = None
    repeats: bool | None = None
    language: str | None = None
    ceiling: int | None = None
    round_timeout_s: int | None = None


async def lock_room(tx: Unit, room_id: str) -> Room | None:
    """The room, read fresh and locked against a concurrent change of its settings (FOR NO KEY
    UPDATE: rows that only reference it are not held up), in the caller's transaction."""
    return (
        await tx.session.execute(
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


async def set_paused(tx: Unit, room_id: str, paused: bool) -> None:
    """Record whether the room's scoring is paused (`UnknownRoom` when there is no such
    room)."""
    result = await tx.session.execute(update(Room).where(Room.id == room_id).values(paused=paused))
    if not getattr(result, "rowcount", 0):
        raise UnknownRoom(room_id)


def set_weight(player: Player, weight: int) -> None:
    """The player's lane weight, written into the loaded player (with the caller's commit)."""
    player.weight = weight
