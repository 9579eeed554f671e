"""A room's card: what taking a guess needs, kept in Redis so that no guess costs SQL.

The card (`cmx:{q}:card:<room>`, state/keys.py names every key) holds the room's id, chat,
topic, title, language and ceiling, and its open round's id, palette, length, repeats and
expiry (round 0: none); beside it the room's seats (Telegram user -> player id) and its banned
users (and the players' names as the bot sent them, for /queue), and the chat's room
(`cmx:{q}:room:<chat>:<thread>`). The database stays the truth:
the card is written from it (`reload`) where the room changes, after the commit, and read
from it when Redis has lost it. The bot checks a guess against the card atomically with the
enqueue (`guards`: the lanes' `admit`), so a card is never trusted past its round id.

Why a stale card cannot lose or double a guess, and heals:

- Every write of a card is conditional on its generation (`card_write.lua`): a writer reads
  the generation, then the database, then writes only if nothing bumped the generation
  meanwhile, and bumps it. A change (a round closed: `close`; a setting, a ban: `drop`
  before and after the commit, then `reload`) bumps it too, so a writer that read the
  database before the change can never put the older state back.
- A round that ended with its card still open (a worker died between its commit and
  `close`) takes guesses that the worker scores "too late", as for any guess that races the
  end of a round; the worker closes the card again when it scores one (`close` is idempotent),
  and the card expires `TTL_S` after its last write in any case.
- A round opened with the card still saying none (the bot died between its commit and the
  card's write): /newgame finds the round open and writes the card.
- After Redis lost its data every card is read from the database again on the room's next
  guess, with the seats: a player keeps their id (the lane of their guesses).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from codemojex.db import store
from codemojex.db.reading import reading
from codemojex.lanes.admission import Guard
from codemojex.outages import is_outage
from codemojex.scoring import split_emojis
from codemojex.state.keys import Keys
from codemojex.state.scripts import register
from codemojex.values.redistypes import AnyRedis

log = logging.getLogger(__name__)
# A card's life after its last write from the database: what a process that died between a
# commit and the card's write left stale is gone by then.
TTL_S: Final = 3600
# Writes of a card read from the database, when it changes under the write (then CardBusy).
RELOAD_TRIES: Final = 3
# Rooms a bot remembers the card of (a forgotten one costs a read), and 16 times as many seats.
CACHE_ROOMS: Final = 100_000


@dataclass(frozen=True, slots=True)
class RoundRules:
    """What parsing a guess for a round needs; a round's never change."""

    id: int
    palette: tuple[str, ...]
    length: int
    repeats: bool
    expires_at: datetime
    emojis: frozenset[str] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "emojis", frozenset(self.palette))


@dataclass(frozen=True, slots=True)
class Card:
    room_id: str
    chat_id: int
    thread_id: int
    title: str
    language: str | None  # None: none chosen yet
    ceiling: int
    round: RoundRules | None  # the open round


@dataclass(frozen=True, slots=True)
class CardRead:
    """One atomic read: the chat's room, its card, the card's generation, and one user's
    seat (player id) and ban."""

    room_id: str | None
    card: Card | None
    gen: int
    seat: str | None
    banned: bool


# The guards of a guess, in their order (`RoomCards.guards`): the refusing one's index says
# what moved.
ROUND_GUARD, BAN_GUARD, SEAT_GUARD = 0, 1, 2
# After them, for a webhook bot: no older update of the guess's order key parked elsewhere.
ORDER_GUARD = 3


class CardBusy(Exception):
    """The card kept changing while it was read from the database (try again later)."""


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _card(fields: dict[str, str]) -> Card | None:
    if "room" not in fields:
        return None
    round_id = int(fields.get("round") or 0)
    rules = None
    if round_id:
        rules = RoundRules(
            id=round_id,
            palette=split_emojis(fields["palette"]),
            length=int(fields["length"]),
            repeats=fields["repeats"] == "1",
            expires_at=datetime.fromtimestamp(int(fields["expires"]) / 1000, UTC),
        )
    return Card(
        room_id=fields["room"],
        chat_id=int(fields["chat"]),
        thread_id=int(fields["thread"]),
        title=fields.get("title", ""),
        language=fields.get("lang") or None,
        ceiling=int(fields["ceiling"]),
        round=rules,
    )


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def card_of(snapshot: store.RoomCard) -> Card:
    """The card of a room as the database has it (times to the millisecond, as stored)."""
    room, rnd = snapshot.room, snapshot.open_round
    rules = None
    if rnd is not None:
        expires = datetime.fromtimestamp(_ms(rnd.expires_at) / 1000, UTC)
        rules = RoundRules(rnd.id, rnd.palette_emojis, rnd.length, rnd.repeats, expires)
    return Card(
        room.id, room.chat_id, room.thread_id, room.title, room.language, room.ceiling, rules
    )


def _fields(card: Card) -> list[str]:
    """The card's hash, as card_write.lua takes it: field, value, field, value, …"""
    fields = {
        "room": card.room_id,
        "chat": str(card.chat_id),
        "thread": str(card.thread_id),
        "title": card.title,
        "lang": card.language or "",
        "ceiling": str(card.ceiling),
        "round": str(card.round.id if card.round else 0),
    }
    if card.round is not None:
        fields |= {
            "palette": "".join(card.round.palette),
            "length": str(card.round.length),
            "repeats": "1" if card.round.repeats else "0",
            "expires": str(_ms(card.round.expires_at)),
        }
    return [x for pair in fields.items() for x in pair]


class RoomCards:
    """The cards of one queue (bot and worker share them)."""

    def __init__(self, redis: AnyRedis, queue: str, *, ttl_s: int = TTL_S) -> None:
        self._redis = redis
        self.keys = Keys(queue)
        self._ttl_s = ttl_s
        self._room_keys: dict[str, tuple[str, str, str]] = {}
        self._read = register(redis, "card_read")
        self._write = register(redis, "card_write")
        self._close = register(redis, "card_close")

    async def read(
        self,
        chat_id: int,
        thread_id: int,
        *,
        user_id: int | None = None,
        room_id: str | None = None,
    ) -> CardRead:
        """The chat's card (through its room id when given), and `user_id`'s seat and ban."""
        if room_id is not None:
            self.keys.card(room_id)  # checks the id before it reaches the script
        keys = [self.keys.prefix, self.keys.room_of(chat_id, thread_id)]
        user = "" if user_id is None else str(int(user_id))
        room, raw, gen, seat, banned = await self._read(keys=keys, args=[room_id or "", user])
        flat = [_text(x) for x in raw]
        fields = dict(zip(flat[::2], flat[1::2], strict=True))
        return CardRead(
            room_id=_text(room) or None,
            card=_card(fields),
            gen=int(gen),
            seat=_text(seat) or None,
            banned=bool(banned),
        )

    async def write(self, snapshot: store.RoomCard, gen: int) -> Card | None:
        """Write the card as `snapshot` (read from the database after `gen` was read) has it;
        None when its generation moved meanwhile (nothing written)."""
        card = card_of(snapshot)
        room = card.room_id
        fields = _fields(card)
        seats = [str(x) for pair in snapshot.seats.items() for x in pair]
        # card_write.lua's arguments: the generation read, the time to live, the room; the
        # card's fields, the seats (each counted first), the banned users
        args: list[str | int] = [gen, self._ttl_s, room]
        args += [len(fields) // 2, *fields]
        args += [len(seats) // 2, *seats, *sorted(snapshot.banned)]
        keys = [
            self.keys.room_of(card.chat_id, card.thread_id),
            self.keys.card(room),
            self.keys.card_gen(room),
            self.keys.seats(room),
            self.keys.bans(room),
            self.keys.names(room),
        ]
        return card if await self._write(keys=keys, args=args) else None

    async def drop(self, room_id: str) -> None:
        """Before and after a change of the room in the database: the card is gone (read
        from the database again) and no write of an older state can land."""
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.incr(self.keys.card_gen(room_id))
            pipe.expire(self.keys.card_gen(room_id), self._ttl_s)
            pipe.delete(self.keys.card(room_id))
            await pipe.execute()

    async def close(self, room_id: str, round_id: int) -> bool:
        """The round ended (after the commit): the card takes no more guesses for it."""
        keys = [self.keys.card(room_id), self.keys.card_gen(room_id)]
        return bool(await self._close(keys=keys, args=[int(round_id), self._ttl_s]))

    async def seat(self, room_id: str, user_id: int, player_id: str) -> None:
        """The user's player id as the database has it (it wins over the one held). The seats
        live the card's time to live from now (the card may have expired meanwhile: a hash this
        creates must expire too)."""
        key = self.keys.seats(room_id)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hset(key, str(int(user_id)), player_id)
            pipe.expire(key, self._ttl_s)
            await pipe.execute()

    def _guarded_keys(self, room_id: str) -> tuple[str, str, str]:
        """The card, bans and seats keys of a room (built and checked once: every guess of the
        room needs them)."""
        keys = self._room_keys.get(room_id)
        if keys is None:
            if len(self._room_keys) >= CACHE_ROOMS:
                self._room_keys.clear()
            keys = (self.keys.card(room_id), self.keys.bans(room_id), self.keys.seats(room_id))
            self._room_keys[room_id] = keys
        return keys

    def order_guard(self, order_key: str, update_id: int) -> Guard:
        """The guess's update is the oldest of its order key the inbox keeps parked (none
        older waits in another process: state/inbox.py)."""
        return Guard("first", self.keys.inbox_key(order_key), "", str(int(update_id)))

    def guards(
        self, room_id: str, round_id: int, user_id: int, player_id: str
    ) -> tuple[Guard, Guard, Guard]:
        """What the enqueue of a guess checks atomically: the round is still the room's open
        round, the user is not banned there, and the lane is the user's seat (taken if free)."""
        card, bans, seats = self._guarded_keys(room_id)
        user = str(int(user_id))
        return (
            Guard("eq", card, "round", str(int(round_id))),
            Guard("out", bans, user),
            Guard("nx", seats, user, player_id),
        )

    def name_note(self, room_id: str, player_id: str, name: str) -> tuple[str, str, str]:
        """The player's name, noted with a guess taken (`Admission.notes`)."""
        return self.keys.names(room_id), player_id, name

    async def names(self, room_id: str, player_ids: list[str]) -> dict[str, str]:
        """The names the bot last sent of these players (those it sent)."""
        if not player_ids:
            return {}
        found = await self._redis.hmget(self.keys.names(room_id), player_ids)
        return {p: _text(n) for p, n in zip(player_ids, found, strict=True) if n is not None}

    def ceiling_source(self, room_id: str) -> tuple[str, str]:
        """Where a room's ceiling is read when the lanes have none (after Redis lost them)."""
        return self._guarded_keys(room_id)[0], "ceiling"


async def reload(
    cards: RoomCards,
    sessionmaker: async_sessionmaker[AsyncSession],
    room_id: str,
    *,
    tries: int = RELOAD_TRIES,
) -> Card | None:
    """The room's card read from the database and written (None: no such room). CardBusy
    when it changed under every try."""
    for _ in range(tries):
        gen = (await cards.read(0, 0, room_id=room_id)).gen
        async with reading(sessionmaker) as session:
            snapshot = await store.room_card(session, room_id)
        if snapshot is None:
            return None
        written = await cards.write(snapshot, gen)
        if written is not None:
            return written
    raise CardBusy(room_id)


async def refresh(
    cards: RoomCards, sessionmaker: async_sessionmaker[AsyncSession], room_id: str
) -> Card | None:
    """After a change of the room was committed: its card read anew from the database and
    written (`reload`). Should that fail, the card is dropped at least, so the room's next
    guess reads it from the database (None); an outage is said once, by the caller's answer."""
    try:
        return await reload(cards, sessionmaker, room_id)
    except Exception as exc:
        if not (is_outage(exc) or isinstance(exc, CardBusy)):
            raise
        log.info("room %s: its card is read again on its next guess (%s)", room_id, exc)
        try:
            await cards.drop(room_id)
        except Exception as again:
            if not is_outage(again):
                raise
            # Redis is out too: the card's TTL ends what it holds
        return None
