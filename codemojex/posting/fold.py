"""Folding the outbox rows waiting for one chat into as few Telegram messages as possible.

Pure functions, no I/O. A quiet room gets a reply to the guess; a busy one gets its results
coalesced into one message (or a few, each under Telegram's 4,096-character limit).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Protocol

import regex

# Telegram counts a message's length in UTF-16 code units: an emoji outside the BMP is 2,
# a family emoji (several code points joined) more.
MAX_MESSAGE: Final = 4096

# Rows of these kinds always go out on their own: a round announcement is the message
# players reply to with their guesses, so it must not be buried inside a batch of results.
STANDALONE_KINDS: Final = frozenset({"round"})  # store.KIND_ROUND

_GRAPHEME = regex.compile(r"\X")


class OutRow(Protocol):
    """What fold needs of an outbox row (codemojex.db.Outbox fits)."""

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


@dataclass(frozen=True, slots=True)
class OutMessage:
    """One message to post. `row_ids` are the rows it completes (empty for the leading
    pieces of a row too long for one message: the row is done with its last piece)."""

    text: str
    reply_to: int | None
    row_ids: tuple[int, ...]


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
        parts = split_text(row.text, limit)
        return [
            OutMessage(
                text=part,
                reply_to=row.reply_to_message_id if i == 0 else None,
                row_ids=(row.id,) if i == len(parts) - 1 else (),
            )
            for i, part in enumerate(parts)
        ]
    out: list[OutMessage] = []
    batch_text = ""
    batch_ids: list[int] = []

    def flush() -> None:
        nonlocal batch_text, batch_ids
        if batch_ids:
            out.append(OutMessage(text=batch_text, reply_to=None, row_ids=tuple(batch_ids)))
        batch_text, batch_ids = "", []

    for row in rows:
        if row.kind in STANDALONE_KINDS:
            flush()
            out.extend(fold([row], limit))
            continue
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
        out.extend(OutMessage(text=p, reply_to=None, row_ids=()) for p in parts[:-1])
        out.append(OutMessage(text=parts[-1], reply_to=None, row_ids=(row.id,)))
    flush()
    return out
