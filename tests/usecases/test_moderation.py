"""usecases.moderation on the real Postgres and the real Redis: a ban writes the player (under
the lane their guesses already use) and the ban in one transaction, then the room's card
(the guess that follows is refused by the enqueue's guards), then empties the player's lanes;
an unban lifts it; a weight reaches the player's lane. The database is the record: a player
it knows under another id keeps that id, and the card's seat follows it."""

from __future__ import annotations

import random

import redis.asyncio as aioredis
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from codemojex import usecases
from codemojex.db import Ban, Player, Room, reading, store
from codemojex.lanes import Admission, Lanes
from codemojex.state.cards import RoomCards, reload
from codemojex.values import ids

CHAT = -1_007_000_000_001
ANN, BOB = 71, 72


async def _room(sessions: async_sessionmaker[AsyncSession]) -> tuple[Room, int]:
    room = await usecases.ensure_room(
        sessions, CHAT, "Club", default_ceiling=3, round_timeout_s=600
    )
    rnd = await usecases.start_round(sessions, room.id, random.Random(1))
    return room, rnd.id


def _guess(cards: RoomCards, room: Room, round_id: int, user: int, lane: str) -> Admission:
    return Admission(room.id, lane, b"g", guards=cards.guards(room.id, round_id, user, lane))


async def test_a_ban_is_written_then_carded_then_its_lanes_emptied(
    real_redis: aioredis.Redis, queue_name: str, sessions: async_sessionmaker[AsyncSession]
) -> None:
    cards, lanes = RoomCards(real_redis, queue_name), Lanes(real_redis, queue_name)
    room, round_id = await _room(sessions)
    await reload(cards, sessions, room.id)
    lane = ids.mint(ids.PLAYER)  # Ann's first guesses wait: the bot gave her this lane
    waiting = await lanes.admit([_guess(cards, room, round_id, ANN, lane)] * 2)
    assert [a.status for a in waiting] == ["enqueued"] * 2
    ann = usecases.Member(ANN, "Ann")

    banned = await usecases.ban(sessions, cards, lanes, room, ann, actor=1)

    assert banned.player_id == lane  # her row is made under the lane her guesses use
    assert banned.dropped == 2  # what waited in her lane is dropped
    assert banned.card is not None and banned.card.room_id == room.id
    async with reading(sessions) as s:
        assert await store.is_banned(s, room.id, ANN)
        player = await s.get(Player, lane)
        assert player is not None and player.display_name == "Ann"
    (refused,) = await lanes.admit([_guess(cards, room, round_id, ANN, lane)])
    assert (refused.status, refused.guard) == ("refused", 1)  # the ban's guard, from the card
    again = await usecases.ban(sessions, cards, lanes, room, ann, actor=1)
    assert again.player_id == lane and again.dropped == 0
    async with reading(sessions) as s:
        assert await s.scalar(select(func.count()).select_from(Ban)) == 1

    lifted = await usecases.unban(sessions, cards, room, ann)
    assert lifted.player_id == lane
    (taken,) = await lanes.admit([_guess(cards, room, round_id, ANN, lane)])
    assert taken.status == "enqueued"
    async with reading(sessions) as s:
        assert not await store.is_banned(s, room.id, ANN)


async def test_the_databases_player_wins_over_the_cards_seat(
    real_redis: aioredis.Redis, queue_name: str, sessions: async_sessionmaker[AsyncSession]
) -> None:
    """Redis lost the seat the database has (a fresh card of another process's lane): the
    player keeps the database's id, and the card's seat becomes it."""
    cards, lanes = RoomCards(real_redis, queue_name), Lanes(real_redis, queue_name)
    room, _ = await _room(sessions)
    bob = await usecases.ensure_player(sessions, room.id, BOB, "Bob")
    await reload(cards, sessions, room.id)
    await cards.seat(room.id, BOB, ids.mint(ids.PLAYER))  # a seat the database never knew

    weighted = await usecases.weight(sessions, cards, lanes, room, usecases.Member(BOB, "Bob"), 5)

    assert (weighted.player_id, weighted.weight) == (bob.id, 5)
    assert (await cards.read(CHAT, 0, user_id=BOB)).seat == bob.id
    assert await real_redis.hget(lanes.keys.gweight, bob.id) == b"5"
