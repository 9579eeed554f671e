"""store.room_card: what the bot keeps in Redis for a room's guesses, read from Postgres."""

from __future__ import annotations

import random

from sqlalchemy.ext.asyncio import AsyncSession

from codemojex import usecases
from codemojex.db import store
from codemojex.db.engine import Sessions
from codemojex.values import ids
from tests.db.helpers import new_room
from tests.helpers import writes


async def test_a_rooms_card_says_its_round_players_and_bans(
    session: AsyncSession, sessions: Sessions
) -> None:
    assert await store.room_card(session, ids.mint(ids.ROOM)) is None  # no such room

    room = await new_room(sessions, chat_id=-77)
    card = await store.room_card(session, room.id)
    assert card is not None and card.room.id == room.id
    assert card.open_round is None and card.seats == {} and card.banned == frozenset()

    rnd = await usecases.start_round(sessions, room.id, random.Random(1))
    ann = await usecases.ensure_player(sessions, room.id, 1, "Ann")
    # A player the bot gave an id (the lane of their guesses) keeps it in the database.
    bob_id = ids.mint(ids.PLAYER)
    bob = await usecases.ensure_player(sessions, room.id, 2, "Bob", player_id=bob_id)
    assert bob.id == bob_id
    card = await store.room_card(session, room.id)
    assert card is not None and card.open_round is not None and card.open_round.id == rnd.id
    assert card.seats == {1: ann.id, 2: bob_id}

    # Banned here; another room's ban does not count.
    other = await new_room(sessions, chat_id=-78)
    ann_elsewhere = await usecases.ensure_player(sessions, other.id, 1, "Ann")
    await writes.ban(sessions, other.id, ann_elsewhere.id, actor=None)
    card = await store.room_card(session, room.id)
    assert card is not None and card.banned == frozenset()
    await writes.ban(sessions, room.id, ann.id, actor=None)
    card = await store.room_card(session, room.id)
    assert card is not None and card.banned == {1}

    await usecases.close_round(sessions, rnd.id, "endround")
    card = await store.room_card(session, room.id)
    assert card is not None and card.open_round is None


async def test_an_existing_player_keeps_its_id(session: AsyncSession, sessions: Sessions) -> None:
    room = await new_room(sessions, chat_id=-79)
    ann = await usecases.ensure_player(sessions, room.id, 1, "Ann")
    again = await usecases.ensure_player(sessions, room.id, 1, "Ann B.", player_id=ids.mint("PLR"))
    assert again.id == ann.id and again.display_name == "Ann B."
