"""The daily code's values, as the store loads and writes them and the game decides over them
(`codemojex.game.daily` holds the rules): the private chat a daily is opened in, the day's
puzzle, a player's feedback rows and record, a daily round's progress, and how rows and
histograms are spelled in their columns."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Final

from codemojex.limits import ROOM

# One code a UTC day: its length and attempts (Wordle's six, two more for repeats); its
# palette's size is the game's (game/daily.py PALETTE_SIZE).
LENGTH: Final = 4
ATTEMPTS: Final = 8


@dataclass(frozen=True, slots=True)
class PrivateChat:
    """The private chat a daily is opened in, and its player (as the bot sees them now)."""

    chat_id: int
    tg_user_id: int
    name: str
    title: str = ""
    thread_id: int = 0
    # a room made on first sight gets these (as a group's room does)
    default_ceiling: int = ROOM.ceiling_default
    round_timeout_s: int = ROOM.round_timeout_s_default


@dataclass(frozen=True, slots=True)
class Puzzle:
    """One day's code: the same palette and secret for everyone."""

    day: date
    number: int
    palette: tuple[str, ...]
    secret: tuple[str, ...]
    length: int = LENGTH
    max_attempts: int = ATTEMPTS

    def __repr__(self) -> str:
        # Never the secret: puzzles end up in logs and tracebacks.
        return f"Puzzle(day={self.day!r}, number={self.number!r})"


Row = tuple[int, int]  # (exact, misplaced) of one attempt


def encode_rows(rows: Sequence[Row]) -> str:
    """Rows as stored: "21,40" (two digits an attempt: a code is at most 6 long)."""
    return ",".join(f"{exact:d}{misplaced:d}" for exact, misplaced in rows)


def decode_rows(text: str | None) -> tuple[Row, ...]:
    if not text:
        return ()
    return tuple((int(part[0]), int(part[1])) for part in text.split(","))


def empty_histogram(max_attempts: int = ATTEMPTS) -> tuple[int, ...]:
    return (0,) * (max_attempts + 1)


@dataclass(frozen=True, slots=True)
class Record:
    """A player's dailies: streak (as of `last_cracked`), best streak, and the histogram."""

    streak: int = 0
    best: int = 0
    last_cracked: date | None = None
    histogram: tuple[int, ...] = empty_histogram()

    @property
    def played(self) -> int:
        """Dailies finished (cracked or out of attempts)."""
        return sum(self.histogram)

    @property
    def cracked(self) -> int:
        return sum(self.histogram[:-1])


def encode_histogram(histogram: Sequence[int]) -> str:
    return ",".join(str(int(n)) for n in histogram)


def decode_histogram(text: str | None, max_attempts: int = ATTEMPTS) -> tuple[int, ...]:
    """A stored histogram; its length is max_attempts + 1 whatever was stored (a change of the
    attempts keeps the counts it can)."""
    counts = [int(part) for part in text.split(",")] if text else []
    out = list(empty_histogram(max_attempts))
    if counts:
        out[-1] = counts[-1]
        for i, n in enumerate(counts[:-1][:max_attempts]):
            out[i] = n
    return tuple(out)


@dataclass(frozen=True, slots=True)
class DailyRound:
    """A daily round's player and progress, loaded with the round under its lock."""

    day: date
    number: int
    tg_user_id: int
    started_at: datetime
    rows: tuple[Row, ...]  # every scored attempt so far, in order
    finished_at: datetime | None
    cracked: bool
    record: Record


@dataclass(frozen=True, slots=True)
class Finish:
    """A daily finished: what the world board takes (after the finish is committed)."""

    day: date
    tg_user_id: int
    attempts: int
    cracked: bool
    finished_at: datetime


@dataclass(frozen=True, slots=True)
class Progress:
    """What a batch changed in one daily round: its rows, and on a finish the result and the
    player's record after it."""

    round_id: int
    day: date
    tg_user_id: int
    rows: tuple[Row, ...]
    finish: Finish | None = None
    record: Record | None = None
