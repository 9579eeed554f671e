"""What admins do to a room's players (/ban, /unban, /weight).

A player is named by a Telegram user (the one an admin's command replied to). Each flow first
finds the user's player in the room as the database has it: made on first sight with the id
their guesses already use (the seat in the room's card, when they have one), and the
database's id, should it differ, becomes the seat. Then:

- ban: the ban row, in the same transaction as the player; then the room's card written anew
  from the database (a guess after it is refused at once); then, while the database says the
  player is banned, the player's lanes emptied (the seat's, and the one the card held before,
  when they differ): what waited is dropped;
- unban: the ban row deleted, the card written anew;
- weight: the player's row gets the weight, then their lane, as the row says
  (`derived.weight`).

The database is the record and goes first; Redis follows it after the commit, from what the
database holds then. Given the admin command's audit row (`command`), the change is written
only with that row, once per message (`audit.first_time`); a message delivered again writes
nothing and only makes Redis what the database says (a process may have died between the two),
which never undoes a later command. A card left stale by a failure after the commit is
dropped, so the room's next guess reads it anew (`state.cards.refresh`).
"""

from __future__ import annotations

from dataclasses import dataclass

from codemojex.db import reading, store
from codemojex.db.engine import Sessions
from codemojex.db.models import Player, Room
from codemojex.db.store import admin, rooms
from codemojex.db.unit import Unit, uow
from codemojex.lanes import Lanes
from codemojex.state.cards import Card, RoomCards, refresh
from codemojex.usecases import derived
from codemojex.usecases.audit import Audit, Committed, first_time, not_told
from codemojex.values import ids


@dataclass(frozen=True, slots=True)
class Member:
    """A Telegram user in a room, as an admin's command names them."""

    user_id: int
    name: str  # as the bot shows it (bot/names.py display_name)


@dataclass(frozen=True, slots=True)
class Moderated:
    """What a ban or an unban did: the player, the room's card as written after it (None:
    dropped, read anew on the room's next guess), the guesses dropped from their lanes, and
    whether this call applied the command (False: its message had taken effect before, and
    only Redis was made what the database says)."""

    player_id: str
    card: Card | None
    dropped: int = 0
    first: bool = True


@dataclass(frozen=True, slots=True)
class Weighted:
    """What a weight did: the player, their lane's weight as the database has it now, and
    whether this call applied the command (as for `Moderated`)."""

    player_id: str
    weight: int | None
    first: bool = True


async def ban(
    sessions: Sessions,
    cards: RoomCards,
    lanes: Lanes,
    room: Room,
    member: Member,
    actor: int | None,
    *,
    command: Audit | None = None,
    committed: Committed = not_told,
) -> Moderated:
    """Ban `member` in `room` (only that room: the same user plays on elsewhere); banning a
    banned player changes nothing but empties their lanes again. With `command`, once per
    its message (see the module's doc)."""
    held = await _held_seat(cards, room, member)
    async with uow(sessions) as tx:
        player = await _player(tx, room, member, held)
        first = command is None or await first_time(tx, command)
        if first:
            await admin.ban(tx, room.id, player.id, actor)
    await committed()
    await _seat(cards, room, member, held, player.id)
    card = await refresh(cards, sessions, room.id)
    dropped = 0
    if await _banned(sessions, room, member):
        for lane in {player.id} | ({held} if held else set()):
            dropped += await lanes.purge(lane)
    return Moderated(player.id, card, dropped, first)


async def unban(
    sessions: Sessions,
    cards: RoomCards,
    room: Room,
    member: Member,
    *,
    command: Audit | None = None,
    committed: Committed = not_told,
) -> Moderated:
    """Lift `member`'s ban in `room` (none: nothing changes). With `command`, once per its
    message (see the module's doc)."""
    held = await _held_seat(cards, room, member)
    async with uow(sessions) as tx:
        player = await _player(tx, room, member, held)
        first = command is None or await first_time(tx, command)
        if first:
            await admin.unban(tx, room.id, player.id)
    await committed()
    await _seat(cards, room, member, held, player.id)
    return Moderated(player.id, await refresh(cards, sessions, room.id), first=first)


async def weight(
    sessions: Sessions,
    cards: RoomCards,
    lanes: Lanes,
    room: Room,
    member: Member,
    value: int,
    *,
    command: Audit | None = None,
    committed: Committed = not_told,
) -> Weighted:
    """Give `member`'s lane in `room` the weight `value` (checked by the caller against
    lanes/admin.py WEIGHT_MIN..WEIGHT_MAX): their row, then their lane as the row says. With
    `command`, once per its message (see the module's doc)."""
    held = await _held_seat(cards, room, member)
    async with uow(sessions) as tx:
        player = await _player(tx, room, member, held)
        first = command is None or await first_time(tx, command)
        if first:
            rooms.set_weight(player, value)
    await committed()
    await _seat(cards, room, member, held, player.id)
    return Weighted(player.id, await derived.weight(sessions, lanes, player.id), first)


async def _banned(sessions: Sessions, room: Room, member: Member) -> bool:
    """Whether the database says `member` is banned in `room` now (a later /unban wins over
    a /ban delivered again)."""
    async with reading(sessions) as session:
        return await store.is_banned(session, room.id, member.user_id)


async def _held_seat(cards: RoomCards, room: Room, member: Member) -> str | None:
    """The member's seat in the room's card (the lane their guesses use), if any."""
    read = await cards.read(room.chat_id, room.thread_id, user_id=member.user_id, room_id=room.id)
    return read.seat


async def _player(tx: Unit, room: Room, member: Member, held: str | None) -> Player:
    """The member's player as the database has it (made under the held seat's id if new)."""
    return await rooms.ensure_player(
        tx, room.id, member.user_id, member.name, player_id=held or ids.mint(ids.PLAYER)
    )


async def _seat(
    cards: RoomCards, room: Room, member: Member, held: str | None, player_id: str
) -> None:
    """The database's id wins: it becomes the member's seat in the card."""
    if player_id != held:
        await cards.seat(room.id, member.user_id, player_id)
