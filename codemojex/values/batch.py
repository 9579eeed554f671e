"""A batch of guesses as the store loads it and as the game's `decide` returns it: pure values
passed from the store to the game and back by `codemojex.usecases.guesses` (the rules are in
`codemojex.game.decide`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final, Literal

from codemojex.locale import Lang
from codemojex.values.daily import DailyRound, Finish, Progress
from codemojex.values.types import SOLVED, Message


def deadline_ms(expires_at: datetime) -> int:
    """A round's deadline on the lanes' clock (ms since the epoch; a naive time is UTC)."""
    if expires_at.tzinfo is None:
        expires_at = expires_at.replace(tzinfo=UTC)
    return int(expires_at.timestamp() * 1000)


# --- what the store loads ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Attempt:
    """One guess to decide, as decoded from its job: the bot validated it before enqueueing."""

    guess_id: str  # the lane job id: a re-delivered job carries the same one
    round_id: int  # the round the guess was typed against
    player_id: str  # the lane
    room_id: str  # the lane's room
    emojis: tuple[str, ...]  # in the palette's spelling
    reply_to: int | None  # the guess message
    taken_ms: int | None = None  # when the bot took it (the job's enqueued_ms; None: unknown)


@dataclass(frozen=True, slots=True)
class RoundState:
    """A round of the batch as it was when its row was locked."""

    id: int
    room_id: str
    chat_id: int  # the room's chat: where the round's messages go
    length: int
    palette: frozenset[str]
    secret: tuple[str, ...]
    ended: bool
    end_reason: str | None
    winning_guess_id: str | None
    language: Lang  # the room's: every text about the round is written in it
    thread_id: int = 0  # the room's forum topic (0: none): where the round's messages go
    deadline_ms: int | None = None  # its expires_at in ms (None: not known, no deadline kept)
    max_attempts: int | None = None  # a player's scored guesses in the round at most
    daily: DailyRound | None = None  # a daily code's round: its player's progress


@dataclass(frozen=True, slots=True)
class PlayerState:
    room_id: str
    name: str


@dataclass(frozen=True, slots=True)
class StoredGuess:
    """A guess recorded before this batch (the same guess id: a re-delivery)."""

    round_id: int
    exact: int | None
    misplaced: int | None
    attempt_no: int | None
    late: bool


@dataclass(frozen=True, slots=True)
class BatchState:
    rounds: Mapping[int, RoundState]
    players: Mapping[str, PlayerState]
    banned: frozenset[tuple[str, str]]  # (room id, player id)
    scored_before: Mapping[tuple[int, str], int]  # (round id, player id) -> scored guesses
    recorded: Mapping[str, StoredGuess]  # by guess id


# --- what `decide` returns --------------------------------------------------------------------

Kind = Literal[
    "scored", "late", "duplicate", "banned", "unknown_round", "unknown_player", "mismatch"
]
REFUSALS: Final = frozenset({"unknown_round", "unknown_player", "mismatch"})


@dataclass(frozen=True, slots=True)
class Verdict:
    """What became of one guess (see the module docstring for each `kind`).

    exact/misplaced/attempt_no: the pegs and attempt number (None unless scored, or a duplicate
    of a scored guess). late: recorded for a round already over (or, for a duplicate, it was).
    round_closed: the round is over now. points: what the guess booked (only a win books).
    chat_id: where the guess was answered; None when nothing was (duplicates, refusals, bans).
    """

    kind: Kind
    exact: int | None = None
    misplaced: int | None = None
    attempt_no: int | None = None
    won: bool = False
    round_closed: bool = False
    late: bool = False
    points: int = 0
    chat_id: int | None = field(default=None, compare=False)  # where, not what
    # A daily round finished with this guess (also reported by its duplicates): the world
    # board takes it once the decision is committed.
    finish: Finish | None = field(default=None, compare=False)

    @property
    def duplicate(self) -> bool:
        return self.kind == "duplicate"

    @property
    def banned(self) -> bool:
        return self.kind == "banned"

    @property
    def refused(self) -> bool:
        """A stale or forged job: nothing was written; delivering it again changes nothing."""
        return self.kind in REFUSALS


@dataclass(slots=True)
class Tally:
    """One player's leaderboard change within a batch."""

    points: int = 0
    wins: int = 0
    guesses: int = 0
    best_solve: int | None = None


@dataclass(frozen=True, slots=True)
class Closing:
    """A round won in this batch (end reason SOLVED), or a daily round whose last attempt was
    used (OUT_OF_ATTEMPTS: no winner)."""

    round_id: int
    winner_player_id: str | None
    winning_guess_id: str | None
    reason: str = SOLVED


@dataclass(frozen=True, slots=True)
class Decision:
    now: datetime  # when it was decided: scored_at, ended_at and created_at of what it writes
    verdicts: list[Verdict]  # one per attempt, in order
    # The guesses to record: each new one (scored or late) once, with its verdict.
    new_guesses: list[tuple[Attempt, Verdict]]
    tallies: dict[tuple[str, str], Tally]  # (room id, player id) -> change
    closings: list[Closing]
    messages: list[Message]  # in the order they are to be posted
    daily: list[Progress] = field(default_factory=list)  # daily rounds' rows and finishes
