"""The store's refusals: nothing was written when one is raised."""

from __future__ import annotations


class StoreError(Exception):
    """Base of the store's refusals."""


class UnknownRoom(StoreError, LookupError):
    pass


class UnknownPlayer(StoreError, LookupError):
    """No such player, or the player is not in the room."""


class SettingOutOfRange(StoreError, ValueError):
    """A room's ceiling or round timeout outside its range in codemojex/limits.py (the bot
    checks first: this guards the rows)."""


class RoundAlreadyOpen(StoreError):
    def __init__(self, room_id: str, round_id: int | None) -> None:
        super().__init__(f"room {room_id} already has an open round ({round_id})")
        self.room_id = room_id
        self.round_id = round_id


class CommandRepeated(StoreError):
    """The command's message took effect before (it was delivered again): nothing written."""

    def __init__(self, chat_id: int, message_id: int) -> None:
        super().__init__(f"message {message_id} of chat {chat_id} took effect before")
        self.chat_id = chat_id
        self.message_id = message_id
