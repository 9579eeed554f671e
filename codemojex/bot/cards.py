"""The bot's side of the rooms' cards (codemojex.state.cards): what this process remembers
of them, reading a card from Redis, or from the database when Redis has lost it, and writing
it anew after a change of the room was committed.

`Cards` is built from what it needs (this process's `CardCache`, the cards in Redis, the
session maker, the room defaults), and is all the handlers and the guess intake know of cards.
Its memory is a hint that lets a valid guess go straight to its one script call, never a
decision: the enqueue checks it atomically (the round still open, the player not banned, the
seat), and whatever the bot answers other than "taken" is decided on Redis's card
(`for_guess`), read anew. So several bot processes, or one that missed a change, take and
refuse the same guesses.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from telegram import Chat, User
from telegram.constants import ChatType

from codemojex import usecases
from codemojex.bot.names import room_title
from codemojex.db import Room, reading, store
from codemojex.outages import is_outage
from codemojex.state.cards import CACHE_ROOMS, Card, CardBusy, CardRead, RoomCards, reload
from codemojex.state.cards import refresh as refresh_card

ChatKey = tuple[int, int]  # (chat id, forum topic)


@dataclass(frozen=True, slots=True)
class RoomDefaults:
    """What a room gets when it is made (the settings' `default_ceiling`, `round_timeout_s`);
    the ceiling is also what the lanes take for a room whose card has none."""

    ceiling: int
    round_timeout_s: int


@dataclass(frozen=True, slots=True)
class SeatSeen:
    player_id: str
    name: str | None  # the name this process last sent in a job (None: none yet)


class CardCache:
    """Cards by chat and seats by (room, user), the least recently used forgotten first."""

    def __init__(self, size: int = CACHE_ROOMS) -> None:
        self._size = size
        self._cards: OrderedDict[ChatKey, Card] = OrderedDict()
        self._seats: OrderedDict[tuple[str, int], SeatSeen] = OrderedDict()

    def card(self, chat_id: int, thread_id: int) -> Card | None:
        card = self._cards.get((chat_id, thread_id))
        if card is not None:
            self._cards.move_to_end((chat_id, thread_id))
        return card

    def keep(self, card: Card) -> None:
        self._cards[(card.chat_id, card.thread_id)] = card
        self._cards.move_to_end((card.chat_id, card.thread_id))
        if len(self._cards) > self._size:
            self._cards.popitem(last=False)

    def seat(self, room_id: str, user_id: int) -> SeatSeen | None:
        return self._seats.get((room_id, user_id))

    def keep_seat(self, room_id: str, user_id: int, player_id: str, name: str | None) -> None:
        self._seats[(room_id, user_id)] = SeatSeen(player_id, name)
        self._seats.move_to_end((room_id, user_id))
        if len(self._seats) > 16 * self._size:
            self._seats.popitem(last=False)


@dataclass(frozen=True, slots=True)
class CardGen:
    room_id: str | None  # the chat's room as Redis knows it (None: it does not)
    gen: int


class Cards:
    """The rooms' cards as this bot process uses them (see the module docstring)."""

    def __init__(
        self,
        shared: RoomCards,
        sessionmaker: async_sessionmaker[AsyncSession],
        defaults: RoomDefaults,
        cache: CardCache | None = None,
    ) -> None:
        # The cards in Redis, every process's: the guards of an enqueue, a round closed, the
        # seats and names an admin command reads.
        self.shared = shared
        self.defaults = defaults
        self._sessionmaker = sessionmaker
        cache = cache or CardCache()
        # What this process remembers, read on every guess: the cache's own methods, so a
        # guess pays no call more for going through this object.
        self.known = cache.card
        self.keep = cache.keep
        self.seat = cache.seat
        self.keep_seat = cache.keep_seat
        # One load from the database at a time per chat: the guesses that find the card gone
        # together wait for one read, not one each.
        self._loading: dict[ChatKey, asyncio.Future[str | None]] = {}

    async def ensure_room(self, chat: Chat, thread_id: int = 0) -> Room:
        """The room of the chat (of its forum topic `thread_id`), created on first sight with
        the room defaults (its ceiling reaches the lanes with its first guess:
        `Lanes.admit`), its title kept fresh."""
        return await usecases.ensure_room(
            self._sessionmaker,
            chat.id,
            room_title(chat),
            default_ceiling=self.defaults.ceiling,
            round_timeout_s=self.defaults.round_timeout_s,
            thread_id=thread_id,
        )

    async def for_guess(self, chat: Chat, thread_id: int, user: User | None) -> CardRead:
        """The chat's card as Redis has it now (read from the database first when Redis has
        none, or when the chat's title changed), with `user`'s seat and ban: what a guess or
        a tap is answered on. Without a card only for a private chat that has no room (no
        /daily was ever sent there)."""
        shared = self.shared
        user_id = None if user is None else user.id
        read = await shared.read(chat.id, thread_id, user_id=user_id)
        title = room_title(chat)
        stale = read.card is not None and title and read.card.title != title
        if read.card is None or stale:
            room_id = await self._load_once(chat, thread_id)
            if room_id is None:
                return CardRead(None, None, 0, None, False)
            read = await shared.read(chat.id, thread_id, user_id=user_id, room_id=room_id)
            if read.card is None:
                raise CardBusy(room_id)  # dropped again at once: a change is under way
        self.keep(read.card)
        if user is not None and read.seat is not None:
            seen = self.seat(read.card.room_id, user.id)
            self.keep_seat(read.card.room_id, user.id, read.seat, seen.name if seen else None)
        return read

    async def refresh(self, room_id: str) -> Card | None:
        """After a change of the room was committed: its card read anew from the database
        (and kept by this process). Should that fail, the card is dropped at least, so the
        room's next guess reads it from the database; an outage is said once, by the caller's
        answer."""
        card = await refresh_card(self.shared, self._sessionmaker, room_id)
        if card is not None:
            self.keep(card)
        return card

    async def generation(self, chat: Chat, thread_id: int = 0) -> CardGen | None:
        """The chat's card's generation as Redis has it now, read before a transaction that
        returns the card to write (`write`); None when Redis cannot say (the card is then
        read anew after the commit)."""
        try:
            read = await self.shared.read(chat.id, thread_id)
        except Exception as exc:
            if not is_outage(exc):
                raise
            return None
        return CardGen(read.room_id, read.gen)

    async def write(self, snapshot: store.RoomCard, before: CardGen | None) -> Card | None:
        """After a change was committed by a transaction that also read the room's card
        (`snapshot`): the card written from it, unless its generation moved since `before`
        (read before that transaction began: then, as when Redis knew another room for the
        chat or nothing at all, it is read anew, `refresh`). A card's generation being 0 when
        Redis does not know the chat's room: a card written meanwhile by anyone has moved
        it."""
        room_id = snapshot.room.id
        if before is not None and before.room_id in (None, room_id):
            try:
                card = await self.shared.write(snapshot, before.gen)
            except Exception as exc:
                if not is_outage(exc):
                    raise
                card = None
            if card is not None:
                self.keep(card)
                return card
        return await self.refresh(room_id)

    async def _load_once(self, chat: Chat, thread_id: int) -> str | None:
        """`_load`, joined by every caller that asks for the same chat meanwhile."""
        key = (chat.id, thread_id)
        running = self._loading.get(key)
        if running is not None:
            return await asyncio.shield(running)
        future: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        self._loading[key] = future
        try:
            room_id = await self._load(chat, thread_id)
        except BaseException as exc:
            # The waiters (if any) raise it too; this one's own cancellation is theirs a
            # "try again" (their handlers go on).
            cancelled = isinstance(exc, asyncio.CancelledError)
            future.set_exception(CardBusy(chat.id) if cancelled else exc)
            future.exception()  # retrieved, whether anyone waits or not
            raise
        else:
            future.set_result(room_id)
            return room_id
        finally:
            del self._loading[key]

    async def _load(self, chat: Chat, thread_id: int) -> str | None:
        """The room (created on first sight, renamed when its title changed) and its card
        written from the database; the room's id. A private chat's room is made by /daily
        only (a guess there before it changes nothing): None when it has none."""
        if chat.type == ChatType.PRIVATE:
            async with reading(self._sessionmaker) as session:
                room = await store.room_by_chat(session, chat.id, thread_id)
            if room is None:
                return None
        else:
            room = await self.ensure_room(chat, thread_id)
        card = await reload(self.shared, self._sessionmaker, room.id)
        if card is not None:
            self.keep(card)
        return room.id
