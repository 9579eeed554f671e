"""Which language the bot answers in.

A group's room has a language (`rooms.language`): the first round takes its starter's (see
`user_language`), `/settings lang=…` changes it; until then, the bot answers each user in
theirs. A private chat follows the user's Telegram `language_code`. A language without a
catalog is English. Where no room was loaded, a handler asks `incoming.chat_language`.
"""

from __future__ import annotations

from telegram import User

from codemojex.db import Room
from codemojex.locale import Lang, match, resolve
from codemojex.state.cards import Card


def user_language(user: User | None) -> Lang:
    """The user's own language (Telegram's language_code, e.g. "pt-br" -> pt_BR), else
    English."""
    return resolve(user.language_code if user is not None else None)


def room_language(room: Room | Card, user: User | None) -> Lang:
    """A group's language: its room's (or its card's), or (none chosen yet) the user's."""
    return match(room.language) or user_language(user)
