"""Starting and ending rounds: what to draw, and what to tell the room. Pure, no I/O.

The store reads the room's settings, asks `new_round` for the round to open, and writes it with
its announcement; closing a round without a winner (its time ran out, or an admin ended it), it
writes the `reveal`. Winning a round is decided with the guesses, in `decide`.

A round's deadline is its `expires_at`. A guess is in time when the bot took it before the
deadline (`in_time`: the lane job's enqueue time, Redis's clock), however late it is scored: a
paused room, an outage or a flood's wait does not make it "too late". So the round timer keeps
a round open past its deadline while guesses taken before it still wait to be scored
(`holds_open`), for at most `rules.ROUND_HOLD_S_MAX`; guesses taken after the deadline are
too late meanwhile. A daily round is not held: its guesses taken before its midnight are
scored after it closed (`decide`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta

from codemojex.game import texts
from codemojex.locale import Lang
from codemojex.scoring import draw_palette, draw_secret
from codemojex.values.types import KIND_KEYS_OFF, KIND_REVEAL, TIMEOUT, Message, Origin

SECOND = timedelta(seconds=1)


@dataclass(frozen=True, slots=True)
class NewRound:
    """A round to open: it keeps the settings it was drawn with, whatever the room changes."""

    palette: tuple[str, ...]
    secret: tuple[str, ...]
    length: int
    repeats: bool
    started_at: datetime
    expires_at: datetime
    announcement: str  # the message that opens it: palette and rules


def new_round(
    *,
    length: int,
    palette: tuple[str, ...] | None,
    palette_size: int,
    repeats: bool,
    timeout_s: int,
    rng: random.Random,
    now: datetime,
    language: Lang,
) -> NewRound:
    """A round under a room's settings: its fixed `palette`, or (None) `palette_size` emojis
    drawn afresh; a secret of `length` of them, without repeats unless `repeats`. The
    announcement is in the room's `language`."""
    palette = palette or draw_palette(rng, palette_size)
    secret = draw_secret(rng, palette, length, repeats=repeats)
    return NewRound(
        palette=palette,
        secret=secret,
        length=length,
        repeats=repeats,
        started_at=now,
        expires_at=now + timedelta(seconds=timeout_s),
        announcement=texts.round_started(language, palette, length, timeout_s, repeats=repeats),
    )


def reveal(
    *,
    round_id: int,
    chat_id: int,
    secret: str,
    reason: str,
    started_at: datetime,
    expires_at: datetime,
    language: Lang,
    thread_id: int | None = None,
) -> Message:
    """The message that ends a round without a winner: the secret, and why it ended, in the
    room's `language` (in the room's forum topic, `thread_id`)."""
    if reason == TIMEOUT:
        timeout_s = round((expires_at - started_at).total_seconds())
        text = texts.timed_out(language, secret, timeout_s)
    else:
        text = texts.ended_by_admin(language, secret)
    return Message(
        chat_id=chat_id, text=text, kind=KIND_REVEAL, round_id=round_id, thread_id=thread_id
    )


def keys_off(*, round_id: int, chat_id: int, announce_message_id: int | None) -> Message:
    """The round ended: its announcement's tap keyboard goes (the sender edits the message).
    Without the announcement's id yet (not posted), the store fills it in when it is."""
    return Message(
        chat_id=chat_id,
        text="",
        kind=KIND_KEYS_OFF,
        round_id=round_id,
        reply_to=announce_message_id,
    )


def opened_before(
    command: Origin,
    *,
    origin_chat_id: int | None,
    origin_message_id: int | None,
    started_at: datetime,
) -> bool:
    """Whether a round was opened before `command` was sent, so that the command may end it:
    an /endround delivered late (after a new round opened) must not end the new round.

    A round opened by a message of the same chat: that message came first (message ids grow
    in a chat; exact, where Telegram's whole-second dates would tie). Otherwise (a round
    opened with no message, or before rounds recorded theirs, or in the chat the group was
    before it became a supergroup): it started before the end of the second the command was
    sent in (Telegram dates a message in whole seconds, rounded down), so a round opened a
    moment before the command counts as before it; one opened a second or more after it does
    not."""
    if origin_message_id is not None and origin_chat_id == command.chat_id:
        return origin_message_id < command.message_id
    return started_at < command.sent_at + SECOND


def is_due(expires_at: datetime, now: datetime) -> bool:
    """An open round whose time has run out (the store's query selects the same rounds)."""
    return expires_at <= now


def in_time(taken_ms: int | None, deadline: int | None) -> bool:
    """A guess the bot took at `taken_ms` counts for a round ending at `deadline` (both ms;
    None: not known, as for a job of an older bot, which is judged by the round alone)."""
    return taken_ms is None or deadline is None or taken_ms < deadline


def holds_open(
    deadline: int, now_ms: int, waiting: bool, hold_max_s: float, *, daily: bool = False
) -> bool:
    """Whether the round timer keeps a round open at `now_ms` (the lanes' clock): before its
    deadline there (a guess taken now still counts, whatever the timer's own clock says), and
    after it while guesses taken before it still `waiting`, up to `hold_max_s` past it.

    A `daily` round is never held: it closes at its midnight, and the guesses taken before
    still count after (`decide`), however long they wait; its chat's next /daily needs the
    chat's one open round anyway."""
    if daily:
        return False
    if now_ms < deadline:
        return True
    return waiting and now_ms < deadline + hold_max_s * 1000
