"""Playing the daily code without the bot, as the bot and the worker do it: a user's private
chat as a room with its player, `/daily` (usecases.daily.open_daily), guesses recorded by
`usecases.record_guesses` as the worker records them. Shared by the store, board, worker and bot
tests."""

from __future__ import annotations

import random
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from codemojex import usecases
from codemojex.db import DailyResult, Round
from codemojex.locale import EN, Lang
from codemojex.usecases.daily import DailyView, open_daily
from codemojex.values import ids
from codemojex.values.batch import Attempt, Verdict
from codemojex.values.daily import PrivateChat
from tests.helpers.support import wrong_guess


async def player_of(sessions: async_sessionmaker[AsyncSession], user: int) -> tuple[str, str]:
    """The user's private chat as a room, and their player in it: (room id, player id)."""
    room = await usecases.ensure_room(sessions, user, "", default_ceiling=2, round_timeout_s=600)
    player = await usecases.ensure_player(sessions, room.id, user, f"user {user}")
    return room.id, player.id


async def open_for(
    sessions: async_sessionmaker[AsyncSession],
    user: int,
    now: datetime,
    rng: random.Random | None = None,
    language: Lang = EN,
) -> DailyView:
    await player_of(sessions, user)
    opened = await open_daily(
        sessions,
        chat=PrivateChat(user, user, f"user {user}"),
        language=language,
        rng=rng or random.Random(user),
        now=now,
    )
    return opened.view


async def daily_round(
    sessions: async_sessionmaker[AsyncSession], user: int, day: datetime
) -> Round:
    async with sessions() as session:
        result = await session.get(DailyResult, (day.date(), user))
        assert result is not None
        rnd = await session.get(Round, result.round_id)
        await session.commit()
    assert rnd is not None
    return rnd


async def play(
    sessions: async_sessionmaker[AsyncSession],
    user: int,
    guesses: list[tuple[str, ...]],
    now: datetime,
    *,
    share: bool = False,
    of: datetime | None = None,
) -> list[Verdict]:
    """The user's guesses of their daily of `of`'s day (default: `now`'s), recorded `now` as
    the worker records them."""
    room_id, player_id = await player_of(sessions, user)
    rnd = await daily_round(sessions, user, of or now)
    attempts = [
        Attempt(ids.mint(ids.JOB), rnd.id, player_id, room_id, emojis, reply_to=None)
        for emojis in guesses
    ]
    return await usecases.record_guesses(sessions, attempts, now=now, share=share)


def misses(rnd: Round, n: int) -> list[tuple[str, ...]]:
    """n different wrong guesses of the round."""
    return [wrong_guess(rnd.secret_emojis, rnd.palette_emojis, i) for i in range(n)]
