"""What the rows the store reads mean, on either database: a locked round as the game sees it,
an attempt as its player's, a stored puzzle, a player's daily record, a daily round's progress.
One mapping for both backends (`postgres.py`, `sqlite.py`) and the daily rows (`daily.py`)."""

from __future__ import annotations

import functools
from dataclasses import replace
from datetime import date
from typing import Any, Final, TypeVar

from codemojex.db.models import Base, split_emojis
from codemojex.locale import resolve
from codemojex.values import daily
from codemojex.values.batch import Attempt, RoundState, deadline_ms

_Model = TypeVar("_Model", bound=Base)
# Days' puzzles whose emojis a process keeps split (cheaper than splitting per /daily).
PUZZLES_SPLIT: Final = 4


def entity(model: type[_Model], row: Any) -> _Model:
    """A model built from a row of its own columns (a Core `select(Model)`), detached."""
    return model(**row._mapping)


def round_state(r: Any, progress: daily.DailyRound | None) -> RoundState:
    """A locked round with its room's address and language, as the game sees it; a daily one
    with its player's progress."""
    return RoundState(
        id=r.id,
        room_id=r.room_id,
        chat_id=int(r.chat_id),
        length=r.length,
        palette=frozenset(split_emojis(r.palette)),
        secret=split_emojis(r.secret),
        ended=r.ended_at is not None,
        end_reason=r.end_reason,
        winning_guess_id=r.winning_guess_id,
        language=resolve(r.language),
        thread_id=int(r.thread_id),
        deadline_ms=deadline_ms(r.expires_at),
        max_attempts=r.max_attempts,
        daily=progress,
    )


def as_player(attempt: Attempt, player_id: str | None) -> Attempt:
    """The attempt as its player's (the lane's own id unless the database has another)."""
    if player_id is None or player_id == attempt.player_id:
        return attempt
    return replace(attempt, player_id=player_id)


@functools.lru_cache(maxsize=PUZZLES_SPLIT)
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


_PUZZLE_COLUMNS = ("day", "number", "palette", "secret", "length", "max_attempts")


def puzzle_from(row: Any, prefix: str | None = None) -> daily.Puzzle | None:
    """The puzzle in a row (None: none), its columns named `day`, `number`, … or, with a
    prefix, `<prefix>_day`, … (a row that joins two puzzles)."""
    got = {name: getattr(row, f"{prefix}_{name}" if prefix else name) for name in _PUZZLE_COLUMNS}
    if got["number"] is None:
        return None
    return puzzle_of(**got)


def record_of(
    streak: int | None,
    best: int | None,
    last_cracked: date | None,
    histogram: str | None,
    max_attempts: int = daily.ATTEMPTS,
) -> daily.Record:
    """A player's daily record from its columns (all None: no record yet, an empty one)."""
    return daily.Record(
        streak=streak or 0,
        best=best or 0,
        last_cracked=last_cracked,
        histogram=daily.decode_histogram(histogram, max_attempts),
    )


def record_from(row: Any | None) -> daily.Record:
    """A player's daily record from its row (None: no record yet, an empty one)."""
    if row is None:
        return record_of(None, None, None, None)
    return record_of(row.streak, row.best, row.last_cracked, row.histogram)


def daily_round(r: Any) -> daily.DailyRound:
    """A daily round's progress: its result row joined with its puzzle's number and attempts
    and the player's record."""
    return daily.DailyRound(
        day=r.day,
        number=r.number,
        tg_user_id=int(r.tg_user_id),
        started_at=r.started_at,
        rows=daily.decode_rows(r.rows),
        finished_at=r.finished_at,
        cracked=bool(r.cracked),
        record=record_of(r.streak, r.best, r.last_cracked, r.histogram, r.max_attempts),
    )
