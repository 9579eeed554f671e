"""Small builders shared by the store tests."""

from __future__ import annotations

from codemojex import usecases
from codemojex.db import Room, Round
from codemojex.db.engine import Sessions
from codemojex.values import ids
from codemojex.values.batch import Attempt, Verdict
from tests.helpers.support import wrong_guess

__all__ = ["attempt", "job_id", "new_room", "record_one", "wrong_guess"]


async def new_room(sessions: Sessions, chat_id: int = -1001, title: str = "Room") -> Room:
    return await usecases.ensure_room(
        sessions, chat_id, title, default_ceiling=2, round_timeout_s=600
    )


def job_id() -> str:
    return ids.mint(ids.JOB)


def attempt(
    rnd: Round,
    player_id: str,
    emojis: tuple[str, ...],
    *,
    guess_id: str | None = None,
    reply_to: int | None = None,
    room_id: str | None = None,
) -> Attempt:
    """A guess of `rnd` as the worker decodes it from a job of the player's lane."""
    return Attempt(
        guess_id=guess_id or job_id(),
        round_id=rnd.id,
        player_id=player_id,
        room_id=room_id or rnd.room_id,
        emojis=emojis,
        reply_to=reply_to,
    )


async def record_one(sessions: Sessions, item: Attempt) -> Verdict:
    """A batch of one guess."""
    [verdict] = await usecases.record_guesses(sessions, [item])
    return verdict
