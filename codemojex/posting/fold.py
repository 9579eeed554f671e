"""Folding the outbox rows waiting for one chat into as few Telegram messages as possible.

Pure functions, no I/O. A quiet room gets a reply to the guess; a busy one gets its results
coalesced into one message (or a few, each under Telegram's 4,096-character limit).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Protocol

import regex

from codemojex.limits import TELEGRAM

# Telegram counts a message's length in UTF-16 code units: an emoji outside the BMP is 2,
# a family emoji (several code points joined) more.
MAX_MESSAGE: Final = TELEGRAM.message_chars_max

# Rows of these kinds always go out on their own: a round announcement is the message
# players reply to with their guesses, so it must not be buried inside a batch of results;
# a daily's card carries its Share button, which a folded message would lose. Removing a
# round's keyboard (keys_off) is an edit of the announcement, not a post.
STANDALONE_KINDS: Final = frozenset({"round", "card", "keys_off"})  # KIND_ROUND, KIND_CARD, …
# Answers to one player's guess: a tapped guess has no message to reply to, so even alone its
# line names the player (KIND_RESULT, KIND_LATE).
ANSWER_KINDS: Final = frozenset({"result", "late"})

_GRAPHEME = regex.compile(r"\X")


class OutRow(Protocol):
    """What fold needs of an outbox row (a claimed `values.types.OutboxRow` fits)."""

    @property
    def id(self) -> int: ...
    @property
    def text(self) -> str: ...
    @property
    def reply_to_message_id(self) -> int | None: ...
    @property
    def kind(self) -> str: ...
    @property
    def player_name(self) -> str | None: ...
    @property
    def thread_id(self) -> int | None: ...
    @property
    def markup(self) -> str | None: ...


@dataclass(frozen=True, slots=True)
class OutMessage:
    """One message to post. `row_ids` are the rows it completes (empty for the leading
    pieces of a row too long for one message: the row is done with its last piece).
    `thread_id`: the forum topic to post in; `markup`: an inline keyboard (JSON) to post
    with it; `keys_off`: not a post but the removal of the keyboard of message `reply_to`."""

    text: str
    reply_to: int | None
    row_ids: tuple[int, ...]
    thread_id: int | None = None
    markup: str | None = None
    keys_off: bool = False


def tg_len(text: str) -> int:
    """The length of `text` as Telegram counts it (UTF-16 code units)."""
    return len(text.encode("utf-16-le")) // 2


def split_text(text: str, limit: int = MAX_MESSAGE) -> list[str]:
    """Cut `text` into pieces of at most `limit` UTF-16 units, at line breaks where possible
    and never inside an emoji (grapheme cluster)."""
    if tg_len(text) <= limit:
        return [text]
    pieces: list[str] = []
    current = ""
    for line in text.split("\n"):
        candidate = line if not current else current + "\n" + line
        if tg_len(candidate) <= limit:
            current = candidate
            continue
        if current:
            pieces.append(current)
            current = ""
        if tg_len(line) <= limit:
            current = line
            continue
        # A single line longer than a message: cut between grapheme clusters.
        for cluster in _units(line, limit):
            if tg_len(current) + tg_len(cluster) > limit and current:
                pieces.append(current)
                current = ""
            current += cluster
    if current:
        pieces.append(current)
    return pieces


def _units(line: str, limit: int) -> list[str]:
    """Grapheme clusters of `line`; a cluster longer than `limit` itself (a flood of
    combining marks) falls apart into code points."""
    out: list[str] = []
    for cluster in _GRAPHEME.findall(line):
        out.extend(cluster if tg_len(cluster) > limit else [cluster])
    return out


def _line(row: OutRow) -> str:
    # In a coalesced message the reply no longer points at the guess, so say whose it is.
    if row.player_name and row.kind not in STANDALONE_KINDS:
        return f"{row.player_name}: {row.text}"
    return row.text


def fold(rows: Sequence[OutRow], limit: int = MAX_MESSAGE) -> list[OutMessage]:
    """The messages that carry `rows` (one chat's pending rows, oldest first), in order.

    - one row alone: its own text, as a reply to the message it answers (a quiet room);
    - several rows: one line each, packed into as few messages as fit, no reply;
    - a standalone row (a round announcement) is never merged with others;
    - a row longer than a message is split over several.
    """
    if not rows:
        return []
    if len(rows) == 1:
        row = rows[0]
        if row.kind == "keys_off":
            return [OutMessage("", row.reply_to_message_id, (row.id,), keys_off=True)]
        named = row.reply_to_message_id is None and row.kind in ANSWER_KINDS
        parts = split_text(_line(row) if named else row.text, limit)
        return [
            OutMessage(
                text=part,
                reply_to=row.reply_to_message_id if i == 0 else None,
                row_ids=(row.id,) if i == len(parts) - 1 else (),
                thread_id=row.thread_id,
                markup=row.markup if i == len(parts) - 1 else None,
            )
            for i, part in enumerate(parts)
        ]
    out: list[OutMessage] = []
    batch_text = ""
    batch_ids: list[int] = []
    batch_thread: int | None = None

    def flush() -> None:
        nonlocal batch_text, batch_ids
        if batch_ids:
            out.append(
                OutMessage(
                    text=batch_text,
                    reply_to=None,
                    row_ids=tuple(batch_ids),
                    thread_id=batch_thread,
                )
            )
        batch_text, batch_ids = "", []

    for row in rows:
        if row.kind in STANDALONE_KINDS:
            flush()
            out.extend(fold([row], limit))
            continue
        if batch_ids and row.thread_id != batch_thread:
            flush()  # a message goes to one forum topic
        batch_thread = row.thread_id
        line = _line(row)
        candidate = line if not batch_ids else batch_text + "\n" + line
        if tg_len(candidate) <= limit:
            batch_text, batch_ids = candidate, [*batch_ids, row.id]
            continue
        flush()
        if tg_len(line) <= limit:
            batch_text, batch_ids = line, [row.id]
            continue
        parts = split_text(line, limit)
        thread = row.thread_id
        out.extend(OutMessage(p, None, (), thread_id=thread) for p in parts[:-1])
        out.append(OutMessage(parts[-1], None, (row.id,), thread_id=thread))
    flush()
    return out
