"""How the bot names what it sees, with no I/O: players and chats as they are shown in every
text (cleaned of what would garble a line), user text as Postgres can store it, and the forum
topic a message is in (with its chat, the name of a room)."""

from __future__ import annotations

import functools
from typing import Final

import regex
from telegram import Chat, Message, User

# A player's name as kept, and the names a process remembers how to show (LRU).
NAME_MAX: Final = 64
SHOWN_CACHE: Final = 8192

# The Unicode bidi controls (embeddings, overrides, isolates, marks: U+061C, U+200E-F,
# U+202A-E, U+2066-9). In a name they would reorder the rest of the line it is shown in:
# "Eve\u202egnp.exe" shows as "Eveexe.png" and turns the result after it around.
_BIDI_CONTROLS = regex.compile(r"\p{Bidi_Control}+")


def topic_of(message: Message) -> int:
    """The forum topic a message is in, 0 for none (a chat without topics, a forum's General
    topic): with the chat, the room. Outside forums `message_thread_id` names a thread of
    replies, which is no room."""
    if message.is_topic_message and message.message_thread_id:
        return int(message.message_thread_id)
    return 0


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


def room_title(chat: Chat) -> str:
    return shown(chat.title or "")[:255]
