"""store.room_card: what the bot keeps in Redis for a room's guesses, read from Postgres."""

from __future__ import annotations

import random

from sqlalchemy.ext.asyncio import AsyncSession

from codemojex import usecases
from codemojex.db import store
from codemojex.values import ids
from tests.db.helpers import new_room
from tests.helpers import writes


async def test_a_rooms_card_says_its_round_players_and_bans(session: AsyncSession) -> None:
    assert await store.room_card(session, ids.mint(ids.ROOM)) is None  # no such room

    room = await new_room(session, chat_id=-77)
    card = await store.room_card(session, room.id)
    assert card is not None and card.room.id == room.id
    assert card.open_round is None and card.seats == {} and card.banned == frozenset()

    rnd = await usecases.start_round(session, room.id, random.Random(1))
    ann = await usecases.ensure_player(session, room.id, 1, "Ann")
    # A player the bot gave an id (the lane of their guesses) keeps it in the database.
    bob_id = ids.mint(ids.PLAYER)
    bob = await usecases.ensure_player(session, room.id, 2, "Bob", player_id=bob_id)
    assert bob.id == bob_id
    card = await store.room_card(session, room.id)
    assert card is not None and card.open_round is not None and card.open_round.id == rnd.id
    assert card.seats == {1: ann.id, 2: bob_id}

    # Banned here; another room's ban does not count.
    other = await new_room(session, chat_id=-78)
    ann_elsewhere = await usecases.ensure_player(session, other.id, 1, "Ann")
    await writes.ban(session, other.id, ann_elsewhere.id, actor=None)
    card = await store.room_card(session, room.id)
    assert card is not None and card.banned == frozenset()
    await writes.ban(session, room.id, ann.id, actor=None)
    card = await store.room_card(session, room.id)
    assert card is not None and card.banned == {1}

    await usecases.close_round(session, rnd.id, "endround")
    card = await store.room_card(session, room.id)
    assert card is not None and card.open_round is None


async def test_an_existing_player_keeps_its_id(session: AsyncSession) -> None:
    room = await new_room(session, chat_id=-79)
    ann = await usecases.ensure_player(session, room.id, 1, "Ann")
    again = await usecases.ensure_player(session, room.id, 1, "Ann B.", player_id=ids.mint("PLR"))
    assert again.id == ann.id and again.display_name == "Ann B."
