"""The daily code's flows: opening today's daily in a player's private chat (`open_daily`), and
where a player stands with today's code (`todays`). Finishing one is part of recording its
guesses (`usecases.guesses`: the game's `decide` finishes it, under the round's lock).

A player's private chat with the bot is a room like any other (its chat id is the user's id);
`/daily` opens there a round of kind "daily": the day's palette and secret, at most the puzzle's
attempts, open until the next 00:00 UTC. Its guesses take the path every guess takes (the
player's lane, the rooms' rotation, the worker's `decide`), its posts the outbox like every
round's. Opening it twice the same day opens nothing: the second `/daily` is told how the
player stands. The day's first `/daily` of a player who lost the day before's code (out of
attempts) shows that code above the new puzzle: it is never shown while its day runs.

The day before's round may still be open in the chat when the next day's is opened (the round
timer has not closed it yet): the open closes it, and the guesses the bot took before its
midnight still count for it when scored after (`codemojex.game.decide`).

Which day a `/daily` opens is the day its message was sent on (`day`), not the day it is
handled on: delivered again after midnight, it opens nothing of the next day; the bot shows
the day it was sent on instead (`daily_on`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Literal

from sqlalchemy.exc import IntegrityError

from codemojex.db.engine import Sessions, backend_of
from codemojex.db.models import DailyResult
from codemojex.db.reading import reading
from codemojex.db.store import daily as daily_store
from codemojex.db.store.backend import NewDaily
from codemojex.db.store.lookups import RoomCard
from codemojex.db.unit import Unit, uow
from codemojex.game import daily, taps, texts
from codemojex.locale import Lang
from codemojex.values.daily import PrivateChat, Puzzle, Record, Row, decode_rows
from codemojex.values.types import KIND_ROUND, Message

Status = Literal["none", "opened", "playing", "finished"]


@dataclass(frozen=True, slots=True)
class DailyView:
    """A player and the day's code: not opened (`none`), just opened, being played, or over."""

    status: Status
    puzzle: Puzzle
    rows: tuple[Row, ...] = ()
    cracked: bool = False
    record: Record = field(default_factory=Record)

    @property
    def left(self) -> int:
        """Attempts still allowed."""
        return max(0, self.puzzle.max_attempts - len(self.rows))

    def streak(self) -> int:
        """The player's streak as of the puzzle's day."""
        return daily.streak_on(self.record, self.puzzle.day)

    def card(self, lang: Lang) -> str:
        """The player's card of the day (a finished daily's)."""
        return daily.card(
            lang,
            self.puzzle.number,
            self.rows,
            length=self.puzzle.length,
            max_attempts=self.puzzle.max_attempts,
            cracked=self.cracked,
            streak=self.streak(),
        )


def _view(puzzle: Puzzle, mine: daily_store.Today, *, opened: bool = False) -> DailyView:
    result = mine.result
    if result is None:
        return DailyView("none", puzzle, record=mine.record)
    status: Status = (
        "opened" if opened else "finished" if result.finished_at is not None else "playing"
    )
    return DailyView(status, puzzle, decode_rows(result.rows), result.cracked, mine.record)


@dataclass(frozen=True, slots=True)
class Opened:
    """What `/daily` in a private chat came to: the player's view, and the room's card as the
    transaction left it when there is an open daily (None: finished, nothing to take), for
    Redis (the bot writes it with no read of its own)."""

    view: DailyView
    card: RoomCard | None


async def open_daily(
    sessions: Sessions,
    *,
    chat: PrivateChat,
    language: Lang,
    rng: random.Random,
    now: datetime,
    day: date | None = None,
) -> Opened:
    """Open the daily of `day` (the day the /daily was sent on; by default, today's as of
    `now`; never a day that is over) for the player of a private chat (its room and player
    made on first sight) and queue its puzzle (with the tap keyboard) in `language`, which the
    chat speaks from now on; or, when they opened it already, open nothing and say how they
    stand.
    ONE transaction (on Postgres two fixed statements: the backend's `look_daily` and
    `open_daily`): the look, then, unless opened already, the day's puzzle (drawn by `rng` if
    the day has none yet: the first drawn is stored and everybody plays it), the room, the
    player, the round, the result row, the outbox row."""
    day = day or daily.day_of(now)
    if day < daily.day_of(now):
        raise ValueError(f"the daily of {day} is over: it is not opened")
    for attempt in (1, 2):
        try:
            return await _open_once(sessions, chat, language, rng, now, day)
        except IntegrityError:
            # The same player's /daily, handled at the same moment by another process, opened
            # it first (one open round per room, one result per player and day, one room per
            # chat) and committed: theirs stands, and a second look finds it (with the card).
            if attempt == 2:
                break
    view = await daily_on(sessions, chat.tg_user_id, day)
    if view is None:  # pragma: no cover - the day's puzzle is stored before anything else
        raise RuntimeError(f"the daily puzzle of {day} is gone")
    return Opened(view, None)


async def _open_once(
    sessions: Sessions,
    chat: PrivateChat,
    language: Lang,
    rng: random.Random,
    now: datetime,
    day: date,
) -> Opened:
    """`open_daily`'s transaction."""
    async with uow(sessions) as tx:
        backend = backend_of(tx.conn)
        seen = await backend.look_daily(tx, chat, day)
        puzzle = seen.puzzle or await _todays_puzzle(tx, day, rng)
        if seen.result is not None:
            view = _view(puzzle, daily_store.Today(seen.result, seen.record))
            return Opened(view, seen.card() if view.status == "playing" else None)
        text = texts.daily_puzzle(
            language, puzzle.number, puzzle.palette, puzzle.length, puzzle.max_attempts
        )
        if seen.missed is not None:  # its day is over: its code can be told now
            missed = texts.daily_yesterday(language, seen.missed.number, seen.missed.secret)
            text = f"{missed}\n\n{text}"

        def post(round_id: int) -> Message:
            markup = taps.keyboard(round_id, puzzle.palette)
            return Message(chat.chat_id, text, KIND_ROUND, round_id, markup=markup)

        new = NewDaily(chat, language, puzzle, now, daily.day_start(day + daily.DAY), post)
        card = await backend.open_daily(tx, seen, new)
    assert card.open_round is not None
    result = DailyResult(
        day=day,
        tg_user_id=chat.tg_user_id,
        round_id=card.open_round.id,
        display_name=chat.name[:255],
        started_at=now,
        finished_at=None,
        cracked=False,
        rows="",
    )
    return Opened(_view(puzzle, daily_store.Today(result, seen.record), opened=True), card)


async def _todays_puzzle(tx: Unit, day: date, rng: random.Random) -> Puzzle:
    """The day's puzzle, drawn and stored now if the day has none yet (race-free: the first
    stored wins, the others read it)."""
    found = await daily_store.get_puzzle(tx.session, day)
    if found is not None:
        return found
    first = await daily_store.first_day(tx.session)
    number = daily.puzzle_number(day, min(first or day, day))
    await daily_store.insert_puzzle(tx, daily.draw_puzzle(rng, day, number))
    found = await daily_store.get_puzzle(tx.session, day)
    if found is None:  # pragma: no cover - the insert or its winner is there to read
        raise RuntimeError(f"the daily puzzle of {day} is neither inserted nor found")
    return found


async def todays(
    sessions: Sessions, tg_user_id: int, now: datetime, rng: random.Random
) -> DailyView:
    """Where the player stands with today's code (the day's puzzle drawn now if nobody has
    opened it yet: boards and invitations name it by its number)."""
    day = daily.day_of(now)
    async with uow(sessions) as tx:
        puzzle = await _todays_puzzle(tx, day, rng)
        mine = await daily_store.today_of(tx.session, day, tg_user_id)
    return _view(puzzle, mine)


async def daily_on(sessions: Sessions, tg_user_id: int, day: date) -> DailyView | None:
    """Where the player stands with the code of `day` (None: nobody opened that day's code,
    and a day's code is never drawn here)."""
    async with reading(sessions) as session:
        puzzle = await daily_store.get_puzzle(session, day)
        if puzzle is None:
            return None
        mine = await daily_store.today_of(session, day, tg_user_id)
    return _view(puzzle, mine)


async def puzzle_today(sessions: Sessions, now: datetime, rng: random.Random) -> Puzzle:
    """Today's puzzle (drawn now if nobody has opened it yet): boards name it by its number."""
    async with uow(sessions) as tx:
        return await _todays_puzzle(tx, daily.day_of(now), rng)
