"""What both ways of recording a batch (`batch_pg`, `batch_portable`) make of the rows they
read: the locked rounds as the game sees them, and an attempt as its player's."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from codemojex.db.models import split_emojis
from codemojex.db.store import daily
from codemojex.locale import resolve
from codemojex.values.batch import Attempt, RoundState, deadline_ms
from codemojex.values.daily import DailyRound
from codemojex.values.types import ROUND_DAILY


async def round_states(conn: AsyncConnection, locked: Sequence[Any]) -> dict[int, RoundState]:
    """The locked rounds as the game sees them; a daily one with its player's progress."""
    dailies = await daily.load_rounds(conn, [r.id for r in locked if r.kind == ROUND_DAILY])
    return {r.id: _round_state(r, dailies.get(r.id)) for r in locked}


def _round_state(r: Any, progress: DailyRound | None) -> RoundState:
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
