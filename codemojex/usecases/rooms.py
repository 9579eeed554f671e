"""Rooms and players on first sight: a chat's room made with the defaults (its title kept
fresh), a user's player in a room made with the id their guesses already use. Each one
transaction opened here."""

from __future__ import annotations

from codemojex.db.engine import Sessions
from codemojex.db.models import Player, Room
from codemojex.db.store import rooms
from codemojex.db.unit import uow


async def ensure_room(
    sessions: Sessions,
    chat_id: int,
    title: str,
    *,
    default_ceiling: int,
    round_timeout_s: int,
    thread_id: int = 0,
) -> Room:
    """The room of a Telegram chat (of one forum topic of it: `thread_id`, 0 for none), created
    with the defaults on first sight (title kept fresh)."""
    async with uow(sessions) as tx:
        return await rooms.ensure_room(
            tx,
            chat_id,
            title,
            default_ceiling=default_ceiling,
            round_timeout_s=round_timeout_s,
            thread_id=thread_id,
        )


async def ensure_player(
    sessions: Sessions,
    room_id: str,
    tg_user_id: int,
    display_name: str,
    *,
    player_id: str | None = None,
) -> Player:
    """The player of a Telegram user in a room, created on first sight (name kept fresh). A
    new player gets `player_id` when given (the id the bot's lanes already use for the user);
    an existing one keeps its own. `UnknownRoom` when there is no such room."""
    async with uow(sessions) as tx:
        return await rooms.ensure_player(tx, room_id, tg_user_id, display_name, player_id=player_id)
