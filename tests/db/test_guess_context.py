"""store.guess_context: everything the bot needs for a guess, in one query, on Postgres."""

from __future__ import annotations

import random

from sqlalchemy.ext.asyncio import AsyncSession

from codemojex.db import store
from tests.db.helpers import new_room


async def test_what_the_bot_sees_as_a_chat_and_its_players_come_and_go(
    session: AsyncSession,
) -> None:
    assert await store.guess_context(session, -77, 1) is None  # a chat never seen

    room = await new_room(session, chat_id=-77)
    ctx = await store.guess_context(session, -77, 1)
    assert ctx is not None and ctx.room.id == room.id
    assert ctx.open_round is None and ctx.player is None and not ctx.banned

    rnd = await store.start_round(session, room.id, random.Random(1))
    ann = await store.ensure_player(session, room.id, 1, "Ann")
    ctx = await store.guess_context(session, -77, 1)
    assert ctx is not None and ctx.open_round is not None and ctx.open_round.id == rnd.id
    assert ctx.player is not None and ctx.player.id == ann.id and not ctx.banned

    # Banned here; Bob (no player yet) is not, and another room's ban does not count.
    other = await new_room(session, chat_id=-78)
    ann_elsewhere = await store.ensure_player(session, other.id, 1, "Ann")
    await store.ban(session, other.id, ann_elsewhere.id, actor=None)
    ctx = await store.guess_context(session, -77, 1)
    assert ctx is not None and not ctx.banned
    await store.ban(session, room.id, ann.id, actor=None)
    ctx = await store.guess_context(session, -77, 1)
    assert ctx is not None and ctx.banned
    bob = await store.guess_context(session, -77, 2)
    assert bob is not None and bob.player is None and not bob.banned

    await store.close_round(session, rnd.id, "endround")
    ctx = await store.guess_context(session, -77, 1)
    assert ctx is not None and ctx.open_round is None
