"""What the store does differently on each database: one abstract backend, one class per
database (`postgres.Postgres`, `sqlite.Sqlite`), picked once where the engine is built
(`codemojex/db/engine.py`) and handed to the use-cases by their unit of work (`unit.py`).

Two flows differ, the two that run most:

- Recording a batch of guesses (`usecases.guesses`): LOAD what the game needs under the
  rounds' locks, then WRITE what `codemojex.game.decide` decided. Postgres runs fixed
  statements over arrays, a handful of round trips whatever the batch's size, which is what
  lets the worker record every batch in hand at once (group commit); SQLite runs portable
  statements, an executemany per table.
- Opening a player's daily (`usecases.daily.open_daily`): LOOK at what the player has (the
  chat's room and its card, the player, today's puzzle, result and record, and the day
  before's puzzle when they lost it), then OPEN (the room and player if new, the chat's
  language, the round, the result row, the puzzle's outbox row). Postgres: two fixed
  statements, the round's id reserved by the look so that the puzzle's keyboard, which names
  it, goes into the same write; SQLite: the round's id given by its insert.

Everything else the store does is the same statements on both. What the rows read mean is
`rows.py`, shared by both backends.

Why recording is safe: the rounds of the batch are locked first (FOR NO KEY UPDATE, in id
order, so two workers recording overlapping batches never deadlock), so the guesses of one
round are decided one transaction after another and the first all-exact guess is its only
winner; everything else is read after the lock, so it includes what the previous holder wrote.
The guess id (the lane job id) is the primary key, so a re-delivered job finds its own row and
changes nothing.

Why opening is safe: the day's puzzle is drawn once (`daily.insert_puzzle`, by the use-case
when the look finds none); one open round per room and one result per player and day are the
database's unique keys, so of two opens of the same daily at once one fails with IntegrityError
(the use-case's unit rolls back and it reads the winner's); a room created at once by two opens
makes the loser's rows miss their room (IntegrityError too, a foreign key): the winner
committed the room with its daily, in one transaction. The look also returns what the chat's
card in Redis is written from (`RoomCard`, as `lookups.room_card` reads it), so the bot writes
the card with no read of its own: the card of the room as this transaction left it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncConnection

from codemojex.db.models import DailyResult, Room, Round
from codemojex.db.store import outbox, rows
from codemojex.db.store.daily import load_rounds
from codemojex.db.store.lookups import RoomCard
from codemojex.db.store.seats import Seat
from codemojex.scoring.rules import DEFAULT_LENGTH, DEFAULT_PALETTE_SIZE
from codemojex.values import daily
from codemojex.values.batch import Attempt, BatchState, Decision, RoundState
from codemojex.values.daily import PrivateChat
from codemojex.values.types import ROUND_DAILY, TIMEOUT, Message

if TYPE_CHECKING:
    from codemojex.db.unit import Unit


@dataclass(frozen=True, slots=True)
class Seen:
    """What a player has, as the daily's look read it (in the caller's transaction)."""

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


class Backend(ABC):
    """The store's statements that differ by database. Each method runs in the caller's
    transaction (`unit.uow`) and never commits."""

    async def mark_sent_many(
        self, tx: Unit, marks: Sequence[tuple[Sequence[int], int | None]], now: datetime
    ) -> int:
        """`outbox.mark_sent` for many posts at once (the sender's posts answered together):
        each `(ids, message_id)` the rows one post carried and its message id. Here one
        statement per post; Postgres makes it one for all. How many rows were marked."""
        return sum([await outbox.mark_sent(tx, ids, mid, now=now) for ids, mid in marks])

    @abstractmethod
    async def load_batch(
        self,
        tx: Unit,
        attempts: Sequence[Attempt],
        seats: Mapping[str, Seat],
        now: datetime,
    ) -> tuple[BatchState, list[Attempt]]:
        """Lock the batch's rounds, write the players the jobs name (`seats`, by lane: new ones
        under their lane's id, renamed ones renamed; `seats.py`) and read what deciding needs:
        the state, and the attempts as their players' (an attempt whose lane has a seat is the
        player's of the seat's (room, user))."""

    @abstractmethod
    async def write_batch(self, tx: Unit, decision: Decision) -> None:
        """Write what `decide` decided: guess rows, leaderboard changes, closed rounds, outbox
        rows and the daily rounds' progress (under the rounds' locks)."""

    @abstractmethod
    async def look_daily(self, tx: Unit, chat: PrivateChat, day: date) -> Seen:
        """What the player of `chat` has on `day`."""

    @abstractmethod
    async def open_daily(self, tx: Unit, seen: Seen, new: NewDaily) -> RoomCard:
        """Write the daily (after `seen` found none; an open round in `seen` is closed first,
        quietly, as its timer would) and return the room's card as written. IntegrityError
        when another open of the same room or daily committed first."""

    # --- what both share --------------------------------------------------------------------

    async def _round_states(
        self, conn: AsyncConnection, locked: Sequence[Any]
    ) -> dict[int, RoundState]:
        """The locked rounds as the game sees them; a daily one with its player's progress."""
        dailies = await load_rounds(conn, [r.id for r in locked if r.kind == ROUND_DAILY])
        return {r.id: rows.round_state(r, dailies.get(r.id)) for r in locked}

    async def _close_stale(self, conn: AsyncConnection, seen: Seen, now: datetime) -> None:
        """An earlier day's daily still open in the room (its midnight passed moments ago and
        the workers' round timer has not closed it yet): closed now, quietly, as the timer
        would. The guesses taken before its midnight and not scored yet still count for it
        (`decide` scores them against a daily closed by its day's end)."""
        if seen.open_round is None:
            return
        await conn.execute(
            update(Round)
            .where(Round.id == seen.open_round.id, Round.ended_at.is_(None))
            .values(ended_at=now, end_reason=TIMEOUT)
        )

    def _card_written(
        self, seen: Seen, new: NewDaily, room_id: str, player_id: str, round_id: int
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
                length=DEFAULT_LENGTH,
                palette=None,
                palette_size=DEFAULT_PALETTE_SIZE,
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
