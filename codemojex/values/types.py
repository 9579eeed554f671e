"""The vocabulary the game's decisions are written in: messages to post, their kinds, kinds of
round, why a round ended, and what a member's answer budget allows. The game writes in it
(`decide`, `rounds`, `daily`), the store keeps it (rounds, outbox rows), the sender reads it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Final

# Kinds of message. The sender posts a round announcement on its own (players reply to it) and
# may fold the others of a busy chat into one message.
KIND_ROUND: Final = "round"  # a round started: palette and rules
KIND_RESULT: Final = "result"  # a scored guess: "🍎🍌🍇🍒 → 🟢🟢🟡⚫  (attempt 3)"
KIND_WIN: Final = "win"  # the winner and the secret
KIND_LATE: Final = "late"  # a guess for a round that had already ended
KIND_REVEAL: Final = "reveal"  # a round ended without a winner: the secret
# Not a post: the round ended, its announcement's tap keyboard is removed (the row's reply_to
# is the announcement; the store fills it in once the announcement is posted).
KIND_KEYS_OFF: Final = "keys_off"
# A daily code finished: its spoiler-free card (with a Share button when inline mode is on).
# Posted on its own, never folded into other lines: it carries a keyboard.
KIND_CARD: Final = "card"


class Say(Enum):
    """What a member's answer budget in a chat allows (state/budget.py): the bot's answers
    and the worker's "too late" lines spend it alike."""

    NOTHING = 0  # the budget is spent and they were told: silence until it is whole
    ANSWER = 1  # the answer
    NOTICE = 2  # instead of the answer, once: "slow down"


# Kinds of round: a group's (or a forum topic's), and a player's daily code in their private
# chat with the bot (codemojex/game/daily.py).
ROUND_GROUP: Final = "group"
ROUND_DAILY: Final = "daily"

# Why a round ended.
SOLVED: Final = "solved"
TIMEOUT: Final = "timeout"
ENDROUND: Final = "endround"  # an admin's /endround
OUT_OF_ATTEMPTS: Final = "attempts"  # a daily's last attempt was used without cracking it


@dataclass(frozen=True, slots=True)
class Origin:
    """The Telegram message a command came in: what its effect is made idempotent on (a
    round records the message that opened it, an audit row the message it came in), and when
    it was sent (Telegram's `date`, whole seconds): a command delivered late acts as of then."""

    chat_id: int
    message_id: int
    sent_at: datetime


@dataclass(frozen=True, slots=True)
class Message:
    """A message to post, decided with the change it tells about (the store writes both in one
    transaction; the sender posts it later). `player_name`: who a result line is about, so that
    the sender can name them when it folds several results into one message."""

    chat_id: int
    text: str
    kind: str
    round_id: int | None
    reply_to: int | None = None
    guess_id: str | None = None
    player_name: str | None = None
    thread_id: int | None = None  # the forum topic of the room (message_thread_id)
    markup: str | None = None  # an inline keyboard (InlineKeyboardMarkup JSON)


@dataclass(frozen=True, slots=True)
class OutboxRow:
    """A queued message as a sender holds it once claimed (the store's `outbox` row without
    its books: claim, sent). `created_at`: when the transaction that decided it wrote it."""

    id: int
    chat_id: int
    text: str
    kind: str
    round_id: int | None
    reply_to_message_id: int | None
    guess_id: str | None
    player_name: str | None
    thread_id: int | None
    markup: str | None
    created_at: datetime
