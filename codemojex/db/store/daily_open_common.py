"""What both ways of opening a daily (`daily_open_pg`, `daily_open_portable`) share: the chat
and what the look saw, the daily to write, the `Opening` interface, and what the rows read
mean (`daily_open.py` says how it all fits)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any, Protocol

from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncConnection

from codemojex import limits
from codemojex.db.models import (
    DailyResult,
    Room,
    Round,
    split_emojis,
)
from codemojex.db.store.rooms import RoomCard
from codemojex.values import daily
from codemojex.values.types import ROUND_DAILY, TIMEOUT, Message


@dataclass(frozen=True, slots=True)
class PrivateChat:
    """The private chat a daily is opened in, and its player (as the bot sees them now)."""

    chat_id: int
    tg_user_id: int
    name: str
    title: str = ""
    thread_id: int = 0
    # a room made on first sight gets these (store.ensure_room's)
    default_ceiling: int = limits.CEILING_DEFAULT
    round_timeout_s: int = limits.ROUND_TIMEOUT_S_DEFAULT


@dataclass(frozen=True, slots=True)
class Seen:
    """What a player has, as the look read it (in the caller's transaction)."""

    puzzle: daily.Puzzle | None  # the day's puzzle (None: nobody drew it yet)
    room: Room | None  # the chat's room (None: none yet)
    player_id: str | None  # the player's id in it (None: none yet)
    player_name: str | None
    result: DailyResult | None  # the player's daily of the day (None: not opened)
    record: daily.Record
    open_round: Round | None  # the room's open round
    seats: dict[int, str] = field(default_factory=dict)
    banned: frozenset[int] = frozenset()
    new_round_id: int | None = None  # the id reserved for the round an open inserts
    # the day before's puzzle when the player lost it, out of attempts (its code is shown
    # above the day's puzzle: that day is over)
    missed: daily.Puzzle | None = None

    def card(self) -> RoomCard | None:
        """The room's card as read (None: no room)."""
        if self.room is None:
            return None
        return RoomCard(self.room, self.open_round, dict(self.seats), self.banned)


@dataclass(frozen=True, slots=True)
class NewDaily:
    """What an open writes: the player's daily of the puzzle's day in `chat`'s room, which
    speaks `language` from now on; the puzzle's post is `message(round id)`."""

    chat: PrivateChat
    language: str
    puzzle: daily.Puzzle
    now: datetime
    expires_at: datetime
    message: Callable[[int], Message]


class Opening(Protocol):
    """Looking and opening on one kind of database (in the caller's transaction; never
    commits)."""

    async def look(self, conn: AsyncConnection, chat: PrivateChat, day: date) -> Seen:
        """What the player of `chat` has on `day`."""
        ...

    async def open(self, conn: AsyncConnection, seen: Seen, new: NewDaily) -> RoomCard:
        """Write the daily (after `seen` found none; an open round in `seen` is closed
        first, quietly, as its timer would) and return the room's card as written.
        IntegrityError when another open of the same room or daily committed first."""
        ...


def record_of(
    streak: int | None, best: int | None, last: date | None, histogram: str | None
) -> daily.Record:
    return daily.Record(
        streak=streak or 0,
        best=best or 0,
        last_cracked=last,
        histogram=daily.decode_histogram(histogram, daily.ATTEMPTS),
    )


def puzzle_from(row: Any, prefix: str = "p") -> daily.Puzzle | None:
    """The puzzle in the look's row, its columns named `<prefix>_day`, … (None: none)."""
    got = {name: getattr(row, f"{prefix}_{name}") for name in _PUZZLE_COLUMNS}
    if got["number"] is None:
        return None
    return puzzle_of(**got)


_PUZZLE_COLUMNS = ("day", "number", "palette", "secret", "length", "max_attempts")


@functools.lru_cache(maxsize=limits.DAILY_PUZZLES_SPLIT)
def puzzle_of(
    day: date, number: int, palette: str, secret: str, length: int, max_attempts: int
) -> daily.Puzzle:
    """A stored puzzle (a pure function of its row: the same few rows all day long)."""
    return daily.Puzzle(
        day=day,
        number=number,
        palette=split_emojis(palette),
        secret=split_emojis(secret),
        length=length,
        max_attempts=max_attempts,
    )


async def close_stale(conn: AsyncConnection, seen: Seen, now: datetime) -> None:
    """An earlier day's daily still open in the room (its midnight passed moments ago and the
    workers' round timer has not closed it yet): closed now, quietly, as the timer would. The
    guesses taken before its midnight and not scored yet still count for it (`decide` scores
    them against a daily closed by its day's end)."""
    if seen.open_round is None:
        return
    await conn.execute(
        update(Round)
        .where(Round.id == seen.open_round.id, Round.ended_at.is_(None))
        .values(ended_at=now, end_reason=TIMEOUT)
    )


def written_card(
    seen: Seen, new: NewDaily, room_id: str, player_id: str, round_id: int
) -> RoomCard:
    """The room's card as the open left it."""
    chat, puzzle = new.chat, new.puzzle
    room = seen.room
    if room is None:
        room = Room(
            id=room_id,
            chat_id=chat.chat_id,
            thread_id=chat.thread_id,
            title=chat.title[:255],
            length=limits.LENGTH_DEFAULT,
            palette=None,
            palette_size=limits.PALETTE_SIZE_DEFAULT,
            repeats=True,
            language=new.language,
            ceiling=chat.default_ceiling,
            round_timeout_s=chat.round_timeout_s,
            created=new.now,
        )
    else:
        room.language = new.language
    rnd = Round(
        id=round_id,
        room_id=room_id,
        secret="".join(puzzle.secret),
        palette="".join(puzzle.palette),
        length=puzzle.length,
        repeats=True,
        started_at=new.now,
        expires_at=new.expires_at,
        kind=ROUND_DAILY,
        max_attempts=puzzle.max_attempts,
    )
    seats = {**seen.seats, chat.tg_user_id: player_id}
    return RoomCard(room, rnd, seats, seen.banned)
