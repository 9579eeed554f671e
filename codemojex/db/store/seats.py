"""Players written with their guesses: the bot writes no row per guess.

The bot gives a Telegram user's first guess in a room a player id of its own minting (fixed
in Redis, first writer wins: state/cards.py) and names the user in the job (`jobs.py`). The
score worker writes the player's row in the transaction that records the guess: inserted if
the (room, user) has none, renamed when the job carries a new name. The database's row wins:
when the (room, user) already has a player (Redis lost the id the bot had given, say), the
guess is recorded as that player's, whatever its lane is called. The backends write them
(`backend.Backend.load_batch`), in the transaction that records the batch.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from codemojex.values.batch import Attempt


@dataclass(frozen=True, slots=True)
class Seat:
    """A player as a guess job names them: its lane (the id the bot gave), the lane's room,
    the Telegram user, and the name when the job carries it."""

    lane: str
    room_id: str
    tg_user_id: int
    name: str | None = None

    @property
    def fallback_name(self) -> str:
        """A new row's name when no job named the player yet (the bot sends it with the
        first guess it takes from them; a retried job may be recorded after a later one)."""
        return f"player {self.tg_user_id}"


def by_lane(seats: Iterable[Seat]) -> dict[str, Seat]:
    """One seat per lane, the last named one winning (a batch is in order: the last name
    sent is the player's name now)."""
    out: dict[str, Seat] = {}
    for seat in seats:
        if seat.lane not in out or seat.name is not None:
            out[seat.lane] = seat
    return out


def distinct(seats: Iterable[Seat]) -> list[Seat]:
    """One seat per (room, user), the last named one winning."""
    out: dict[tuple[str, int], Seat] = {}
    for seat in seats:
        held = out.get((seat.room_id, seat.tg_user_id))
        if held is None or seat.name is not None:
            out[(seat.room_id, seat.tg_user_id)] = seat
    return list(out.values())


def of_batch(attempts: Sequence[Attempt], seats: Mapping[str, Seat]) -> list[Seat]:
    """The seats a batch's attempts name (`seats` by lane), one per (room, user)."""
    return distinct(seats[a.player_id] for a in attempts if a.player_id in seats)
