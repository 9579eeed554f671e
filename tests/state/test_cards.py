"""The rooms' cards in Redis (state/cards.py): written from the database only over the
generation their writer read, closed when a round ends, checked by the enqueue. On the real
Redis, fakeredis and a Redis Cluster (a card's keys share the queue's slot)."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from codemojex import usecases
from codemojex.db import Room, Round, store
from codemojex.lanes import Admission, Lanes
from codemojex.state.cards import Card, RoomCards, RoundRules, reload
from codemojex.values import ids
from codemojex.values.redistypes import AnyRedis

CHAT = -1_005_000_000_001
EXPIRES = datetime(2031, 1, 2, 3, 4, 5, tzinfo=UTC)


def snapshot(
    room_id: str,
    *,
    round_id: int | None = 7,
    language: str | None = "ru",
    seats: dict[int, str] | None = None,
    banned: frozenset[int] = frozenset(),
) -> store.RoomCard:
    room = Room(id=room_id, chat_id=CHAT, thread_id=0, title="Emoji Club", length=4,
                palette=None, palette_size=6, ceiling=3, round_timeout_s=600,
                language=language)  # fmt: skip
    rnd = None
    if round_id is not None:
        rnd = Round(id=round_id, room_id=room_id, secret="🍎🍌🍇🍒", palette="🍎🍌🍇🍒🥝🍑",
                    length=4, repeats=False, expires_at=EXPIRES)  # fmt: skip
    return store.RoomCard(room, rnd, dict(seats or {}), banned)


def rules(round_id: int = 7) -> RoundRules:
    return RoundRules(round_id, ("🍎", "🍌", "🍇", "🍒", "🥝", "🍑"), 4, False, EXPIRES)


async def test_a_card_is_written_and_read_whole(redis_any: AnyRedis, queue_name: str) -> None:
    cards = RoomCards(redis_any, queue_name, ttl_s=120)
    room, ann, bob = ids.mint(ids.ROOM), ids.mint(ids.PLAYER), ids.mint(ids.PLAYER)
    unknown = await cards.read(CHAT, 0, user_id=1)
    assert (unknown.room_id, unknown.card, unknown.gen, unknown.seat) == (None, None, 0, None)
    written = await cards.write(snapshot(room, seats={1: ann, 2: bob}, banned=frozenset({2})), 0)
    card = Card(room, CHAT, 0, "Emoji Club", "ru", 3, rules())
    assert written == card
    ann_read = await cards.read(CHAT, 0, user_id=1)
    assert (ann_read.room_id, ann_read.card, ann_read.seat, ann_read.banned) == (
        room, card, ann, False,
    )  # fmt: skip
    bob_read = await cards.read(CHAT, 0, user_id=2, room_id=room)
    assert (bob_read.seat, bob_read.banned, bob_read.gen) == (bob, True, 1)
    # Every key of the card lives the card's time, then it is read from the database again.
    for key in (cards.keys.room_of(CHAT, 0), cards.keys.card(room), cards.keys.seats(room),
                cards.keys.bans(room), cards.keys.card_gen(room)):  # fmt: skip
        assert 0 < await redis_any.ttl(key) <= 120, key
    # A room without a round and a language.
    await cards.write(snapshot(room, round_id=None, language=None), 1)
    read = await cards.read(CHAT, 0)
    assert read.card == Card(room, CHAT, 0, "Emoji Club", None, 3, None)
    assert await redis_any.scard(cards.keys.bans(room)) == 0  # the bans are the database's


async def test_a_write_over_a_moved_generation_is_refused(
    redis_any: AnyRedis, queue_name: str
) -> None:
    """A writer that read the database before a change cannot write it back: every change
    (a close, a drop, another write) moves the generation it read."""
    cards = RoomCards(redis_any, queue_name)
    room = ids.mint(ids.ROOM)
    await cards.write(snapshot(room), 0)
    gen = (await cards.read(CHAT, 0)).gen
    # The round ends (the worker's commit, then its close) while a reader has the database's
    # state of before in hand: its write is refused, the card stays closed.
    assert await cards.close(room, 7) is True
    assert await cards.write(snapshot(room), gen) is None
    assert (await cards.read(CHAT, 0)).card == Card(room, CHAT, 0, "Emoji Club", "ru", 3, None)
    # A close of another round (or of this one again) changes no card, and still moves the
    # generation (a write that read the database before it cannot land).
    gen = (await cards.read(CHAT, 0)).gen
    assert await cards.close(room, 6) is False
    assert await cards.write(snapshot(room, round_id=8), gen) is None
    # A close while the card is gone leaves none, and refuses writes of before it too.
    gen = (await cards.read(CHAT, 0)).gen
    await cards.drop(room)
    assert (await cards.read(CHAT, 0)).card is None
    assert await cards.write(snapshot(room, round_id=8), gen) is None
    now = (await cards.read(CHAT, 0)).gen
    assert await cards.write(snapshot(room, round_id=8), now) is not None
    assert (await cards.read(CHAT, 0)).card.round == rules(8)  # type: ignore[union-attr]


async def test_the_seats_of_the_database_win_over_the_held_ones(
    redis_any: AnyRedis, queue_name: str
) -> None:
    cards = RoomCards(redis_any, queue_name)
    minted, kept, truth = (ids.mint(ids.PLAYER) for _ in range(3))
    room = ids.mint(ids.ROOM)
    await redis_any.hset(cards.keys.seats(room), mapping={"1": minted, "2": kept})
    await cards.write(snapshot(room, seats={1: truth}), 0)
    assert (await cards.read(CHAT, 0, user_id=1)).seat == truth
    assert (await cards.read(CHAT, 0, user_id=2)).seat == kept  # not in the database yet
    await cards.seat(room, 2, truth)
    assert (await cards.read(CHAT, 0, user_id=2)).seat == truth


async def test_a_thousand_players_fit_one_write(redis_any: AnyRedis, queue_name: str) -> None:
    cards = RoomCards(redis_any, queue_name)
    room = ids.mint(ids.ROOM)
    seats = {user: ids.mint(ids.PLAYER) for user in range(1, 5001)}
    await cards.write(snapshot(room, seats=seats, banned=frozenset(range(1, 2501))), 0)
    # and the empty field that makes the hash exist, and expire, before any guess adds to it
    assert await redis_any.hlen(cards.keys.seats(room)) == 5000 + 1
    assert await redis_any.scard(cards.keys.bans(room)) == 2500


async def test_the_seats_and_names_a_guess_adds_expire_with_the_card(
    redis_any: AnyRedis, queue_name: str
) -> None:
    """A room with no players yet: its first guess's admission adds the seat and the name to
    hashes the card's write made, with the card's time to live (they had none when the
    admission created them)."""
    cards = RoomCards(redis_any, queue_name, ttl_s=600)
    room = ids.mint(ids.ROOM)
    await cards.write(snapshot(room), 0)
    lanes = Lanes(redis_any, queue_name)
    player = ids.mint(ids.PLAYER)
    (admitted,) = await lanes.admit(
        [
            Admission(
                room, player, b"7:2:3:x", guards=cards.guards(room, 7, 7, player),
                notes=(cards.name_note(room, player, "Seven"),),
            )
        ]
    )  # fmt: skip
    assert admitted.status == "enqueued", admitted
    assert (await cards.read(CHAT, 0, user_id=7)).seat == player
    assert await cards.names(room, [player]) == {player: "Seven"}
    for key in (cards.keys.card(room), cards.keys.seats(room), cards.keys.names(room)):
        assert 0 < await redis_any.ttl(key) <= 600, key
    await cards.seat(room, 8, ids.mint(ids.PLAYER))  # the admins' way in: expires too
    assert 0 < await redis_any.ttl(cards.keys.seats(room)) <= 600


async def test_the_enqueue_checks_the_card(redis_any: AnyRedis, queue_name: str) -> None:
    """The guards a guess is admitted under: the card's open round, the ban, the seat."""
    cards, lanes = RoomCards(redis_any, queue_name), Lanes(redis_any, queue_name)
    room, ann = ids.mint(ids.ROOM), ids.mint(ids.PLAYER)
    await cards.write(snapshot(room, seats={1: ann}, banned=frozenset({2})), 0)

    def guess(user: int, round_id: int, lane: str) -> Admission:
        return Admission(room, lane, b"g", guards=cards.guards(room, round_id, user, lane),
                         ceiling=2, ceiling_from=cards.ceiling_source(room))  # fmt: skip

    newcomer = ids.mint(ids.PLAYER)
    got = await lanes.admit(
        [
            guess(1, 7, ann),
            guess(1, 6, ann),  # an older round
            guess(2, 7, ids.mint(ids.PLAYER)),  # banned
            guess(1, 7, ids.mint(ids.PLAYER)),  # Ann's seat is another lane
            guess(3, 7, newcomer),  # a first guess: the seat is taken
        ]
    )
    assert [(a.status, a.guard, a.found) for a in got] == [
        ("enqueued", None, None),
        ("refused", 0, "7"),
        ("refused", 1, "2"),
        ("refused", 2, ann),
        ("enqueued", None, None),
    ]
    assert (await cards.read(CHAT, 0, user_id=3)).seat == newcomer
    # The room's ceiling came from the card (3), not the default given (2).
    assert (await lanes.snapshot(room))["rooms"][room]["ceiling"] == 3
    await cards.close(room, 7)
    (late,) = await lanes.admit([guess(1, 7, ann)])
    assert (late.status, late.guard, late.found) == ("refused", 0, "0")


async def test_names_noted_with_guesses(redis_any: AnyRedis, queue_name: str) -> None:
    cards, lanes = RoomCards(redis_any, queue_name), Lanes(redis_any, queue_name)
    room, ann, bob = ids.mint(ids.ROOM), ids.mint(ids.PLAYER), ids.mint(ids.PLAYER)
    await lanes.admit([Admission(room, ann, b"g", notes=(cards.name_note(room, ann, "Ann"),))])
    assert await cards.names(room, [ann, bob]) == {ann: "Ann"}
    assert await cards.names(room, []) == {}


@pytest.mark.parametrize("bad", ["ROM}:*", "PLR" + "0" * 26, ""])
def test_card_keys_are_built_from_room_ids_only(queue_name: str, bad: str) -> None:
    from codemojex.state.keys import Keys

    with pytest.raises(ValueError):
        Keys(queue_name).card(bad)


async def test_reload_writes_what_the_database_has(
    redis_r: AnyRedis, queue_name: str, sessionmaker: async_sessionmaker[AsyncSession]
) -> None:
    cards = RoomCards(redis_r, queue_name)
    room = await usecases.ensure_room(
        sessionmaker, CHAT, "Club", default_ceiling=2, round_timeout_s=600
    )
    rnd = await usecases.start_round(sessionmaker, room.id, random.Random(1))
    ann = await usecases.ensure_player(sessionmaker, room.id, 1, "Ann")
    card = await reload(cards, sessionmaker, room.id)
    assert card is not None and card.round is not None and card.round.id == rnd.id
    assert card.round.palette == rnd.palette_emojis and card.ceiling == 2
    read = await cards.read(CHAT, 0, user_id=1)
    assert read.card == card and read.seat == ann.id
    assert await reload(cards, sessionmaker, ids.mint(ids.ROOM)) is None  # no such room
