"""Rooms and players as the bot sees them: get-or-create, and how names and titles are shown."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Final

import regex
from telegram import Chat, User

from codemojex import limits, usecases
from codemojex.db import Room

if TYPE_CHECKING:  # the services (the answers, which name players from here; the card cache,
    # bot/cards.py, which imports this module)
    from codemojex.bot.context import BotServices

NAME_MAX: Final = limits.NAME_CHARS_MAX
SHOWN_CACHE: Final = limits.SHOWN_NAMES_CACHE

# The Unicode bidi controls (embeddings, overrides, isolates, marks: U+061C, U+200E-F,
# U+202A-E, U+2066-9). In a name they would reorder the rest of the line it is shown in:
# "Eve\u202egnp.exe" shows as "Eveexe.png" and turns the result after it around.
_BIDI_CONTROLS = regex.compile(r"\p{Bidi_Control}+")


def storable(text: str) -> str:
    """User text as Postgres can store it: text columns refuse NUL, and UTF-8 has no lone
    surrogates (an update's JSON can carry both)."""
    return text.replace("\x00", "").encode("utf-8", "replace").decode("utf-8")


@functools.lru_cache(maxsize=SHOWN_CACHE)
def shown(text: str) -> str:
    """User text as it may be shown to others: storable, without bidi controls, whitespace
    runs (newlines included) as one space. Names and titles come again with every message:
    the last few thousand are remembered."""
    return " ".join(_BIDI_CONTROLS.sub("", storable(text)).split())


def display_name(user: User) -> str:
    """How a player is named in every text (results, wins, leaderboards, /queue, answers)."""
    name = shown(user.full_name) or shown(user.username or "") or f"player {user.id}"
    return name[:NAME_MAX]


async def ensure_room(services: BotServices, chat: Chat, thread_id: int = 0) -> Room:
    """The room of the chat (of its forum topic `thread_id`), created on first sight (its
    ceiling reaches the lanes with its first guess: `Lanes.admit`)."""
    async with services.sessionmaker() as session:
        return await usecases.ensure_room(
            session,
            chat.id,
            room_title(chat),
            default_ceiling=services.settings.default_ceiling,
            round_timeout_s=services.settings.round_timeout_s,
            thread_id=thread_id,
        )


def room_title(chat: Chat) -> str:
    return shown(chat.title or "")[:255]
