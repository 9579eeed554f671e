"""What admins do to a room's players (/ban, /unban, /weight), and the audit log of every admin
action, allowed or refused (the bot's admin commands, the operators' page).

A player is named by a Telegram user (the one an admin's command replied to). Each flow first
finds the user's player in the room as the database has it: made on first sight with the id
their guesses already use (the seat in the room's card, when they have one), and the
database's id, should it differ, becomes the seat. Then:

- ban: the ban row, in the same transaction as the player; then the room's card written anew
  from the database (a guess after it is refused at once); then the player's lanes emptied
  (the seat's, and the one the card held before, when they differ): what waited is dropped;
- unban: the ban row deleted, the card written anew;
- weight: the player's lane gets its weight in the lanes (no row: the lanes keep it).

The database is the record and goes first; Redis follows it after the commit. A card left
stale by a failure after the commit is dropped, so the room's next guess reads it anew
(`posting.cards.refresh`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from codemojex import ids
from codemojex.db.models import AuditLog, Player, Room
from codemojex.db.store import admin, rooms
from codemojex.db.unit import uow
from codemojex.lanes import Lanes
from codemojex.posting.cards import Card, RoomCards, refresh


@dataclass(frozen=True, slots=True)
class Member:
    """A Telegram user in a room, as an admin's command names them."""

    user_id: int
    name: str  # as the bot shows it (bot/rooms.py display_name)


@dataclass(frozen=True, slots=True)
class Moderated:
    """What a ban or an unban did: the player, the room's card as written after it (None:
    dropped, read anew on the room's next guess), the guesses dropped from their lanes."""

    player_id: str
    card: Card | None
    dropped: int = 0


async def ban(
    sessions: async_sessionmaker[AsyncSession],
    cards: RoomCards,
    lanes: Lanes,
    room: Room,
    member: Member,
    actor: int | None,
) -> Moderated:
    """Ban `member` in `room` (only that room: the same user plays on elsewhere); banning a
    banned player changes nothing but empties their lanes again."""
    held = await _held_seat(cards, room, member)
    async with sessions() as session, uow(session):
        player = await _player(session, room, member, held)
        await admin.ban(session, room.id, player.id, actor)
    await _seat(cards, room, member, held, player.id)
    card = await refresh(cards, sessions, room.id)
    dropped = 0
    for lane in {player.id} | ({held} if held else set()):
        dropped += await lanes.purge(lane)
    return Moderated(player.id, card, dropped)


async def unban(
    sessions: async_sessionmaker[AsyncSession], cards: RoomCards, room: Room, member: Member
) -> Moderated:
    """Lift `member`'s ban in `room` (none: nothing changes)."""
    held = await _held_seat(cards, room, member)
    async with sessions() as session, uow(session):
        player = await _player(session, room, member, held)
        await admin.unban(session, room.id, player.id)
    await _seat(cards, room, member, held, player.id)
    return Moderated(player.id, await refresh(cards, sessions, room.id))


async def weight(
    sessions: async_sessionmaker[AsyncSession],
    cards: RoomCards,
    lanes: Lanes,
    room: Room,
    member: Member,
    value: int,
) -> str:
    """Give `member`'s lane in `room` the weight `value` (checked by the caller against
    LANES.weight_min..LANES.weight_max); the player's id."""
    held = await _held_seat(cards, room, member)
    async with sessions() as session, uow(session):
        player = await _player(session, room, member, held)
    await _seat(cards, room, member, held, player.id)
    await lanes.weight(player.id, value)
    return player.id


async def _held_seat(cards: RoomCards, room: Room, member: Member) -> str | None:
    """The member's seat in the room's card (the lane their guesses use), if any."""
    read = await cards.read(room.chat_id, room.thread_id, user_id=member.user_id, room_id=room.id)
    return read.seat


async def _player(session: AsyncSession, room: Room, member: Member, held: str | None) -> Player:
    """The member's player as the database has it (made under the held seat's id if new)."""
    return await rooms.ensure_player(
        session, room.id, member.user_id, member.name, player_id=held or ids.mint(ids.PLAYER)
    )


async def _seat(
    cards: RoomCards, room: Room, member: Member, held: str | None, player_id: str
) -> None:
    """The database's id wins: it becomes the member's seat in the card."""
    if player_id != held:
        await cards.seat(room.id, member.user_id, player_id)


async def audit(
    session: AsyncSession,
    *,
    room_id: str | None,
    actor_tg_id: int | None,
    action: str,
    args: str | Mapping[str, Any] = "",
    allowed: bool,
) -> AuditLog:
    """Write one admin action (allowed or refused) to the audit log."""
    async with uow(session):
        return await admin.audit(
            session,
            room_id=room_id,
            actor_tg_id=actor_tg_id,
            action=action,
            args=args,
            allowed=allowed,
        )
