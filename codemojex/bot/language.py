"""Which language the bot answers in.

A group's room has a language (`rooms.language`): the first round takes its starter's (see
`user_language`), `/settings lang=…` changes it; until then, the bot answers each user in
theirs. A private chat follows the user's Telegram `language_code`. A language without a
catalog is English.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from telegram import User

from codemojex.bot.context import BotServices
from codemojex.db import Room, reading, store
from codemojex.locale import Lang, match, resolve
from codemojex.outages import outage_of
from codemojex.posting.cards import Card

if TYPE_CHECKING:  # incoming answers in the user's language: it imports this module
    from codemojex.bot.incoming import Sender

log = logging.getLogger(__name__)


def user_language(user: User | None) -> Lang:
    """The user's own language (Telegram's language_code, e.g. "pt-br" -> pt_BR), else
    English."""
    return resolve(user.language_code if user is not None else None)


def room_language(room: Room | Card, user: User | None) -> Lang:
    """A group's language: its room's (or its card's), or (none chosen yet) the user's."""
    return match(room.language) or user_language(user)


async def chat_language(services: BotServices, who: Sender) -> Lang:
    """The language to answer `who` in, where no room was loaded: in a group, its room's (read,
    never created); in a private chat, the user's. With the database out, the user's: an
    answer that needs nothing else (/help) still goes out."""
    if who.in_group:
        try:
            async with reading(services.sessionmaker) as session:
                room = await store.room_by_chat(session, who.chat.id, who.thread_id)
        except Exception as exc:
            if outage_of(exc) != "postgres":
                raise
            log.info("chat %s: its language is unknown while the database is out", who.chat.id)
            return user_language(who.user)
        if room is not None:
            return room_language(room, who.user)
    return user_language(who.user)
