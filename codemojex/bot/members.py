"""Who the bot sees in a group, for the daily's group board (bot/daily.py reads them; the set
in Redis is state/members.py's).

A group's member is whoever the bot sees say anything there: a message that is no guess
taken (chatter, which the bot gets with privacy mode off or as an admin; an invalid guess), a
sticker or a photo, a command (once its answer budget was spent: a command past the budget
notes nobody), a tap (in the tap rate's own round trip, bot/taps.py), and a join, from the
chat_member updates Telegram sends a bot that administers the group (a leave forgets). A
guess taken notes nobody: the worker writes its player's row, which the board reads.

Off every update's path, with no round trip per message: a note is a dict entry in memory,
and the notes go to Redis together, one pipeline (one round trip) every `flush_s` at most,
and before the board is read (`of`). Bounded: at most `pending_max` notes wait (a member
seen again takes no more room; past the bound a new one is dropped and counted, `dropped`).
Best effort: with Redis out a flush is given up (logged, counted), and a bot that stops
loses at most the notes of its last `flush_s` (`close` flushes them when called).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from datetime import datetime
from typing import Any, Final

from telegram import Chat, ChatMember, ChatMemberUpdated, User
from telegram.constants import ChatMemberStatus, ChatType

from codemojex.outages import OUTAGES, is_outage
from codemojex.state.members import GroupMembers

# Members noted in memory are written together once a FLUSH_S (no round trip per message); at
# most PENDING_MAX wait (about 1 MB), a new one past them dropped.
FLUSH_S: Final = 1.0
PENDING_MAX: Final = 10_000
GROUPS = frozenset({ChatType.GROUP, ChatType.SUPERGROUP})
_IN = frozenset({ChatMemberStatus.MEMBER, ChatMemberStatus.ADMINISTRATOR, ChatMemberStatus.OWNER})


def _person_in_group(chat: Chat, user: User | None) -> bool:
    return user is not None and not user.is_bot and chat.type in GROUPS


def _in(member: ChatMember) -> bool:
    if member.status == ChatMemberStatus.RESTRICTED:  # restricted, in the group or not
        return bool(getattr(member, "is_member", False))
    return member.status in _IN


class Members:
    """The groups' members as the bot notes them, on the bot's clock (the daily's)."""

    def __init__(
        self,
        group: GroupMembers,
        clock: Callable[[], datetime],
        *,
        flush_s: float = FLUSH_S,
        pending_max: int = PENDING_MAX,
    ) -> None:
        self.group = group  # the sets in Redis
        self._clock = clock
        self.flush_s = flush_s
        self.pending_max = pending_max
        self._pending: dict[tuple[int, int], datetime] = {}  # (chat, user) -> last seen
        self._timer: asyncio.TimerHandle | None = None
        self._flushing: asyncio.Task[None] | None = None
        self.flushes = 0  # pipelines sent
        self.dropped = 0  # notes dropped: `pending_max` were waiting

    def note(self, chat: Chat, user: User | None) -> None:
        """`user` was seen in `chat` now (nothing unless a person in a group): kept in memory,
        written with the others at the next flush. No I/O."""
        if not _person_in_group(chat, user):
            return
        assert user is not None
        key = (chat.id, user.id)
        if key not in self._pending and len(self._pending) >= self.pending_max:
            self.dropped += 1
            return
        self._pending[key] = self._clock()
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self.flush_s, self._due)

    async def seen(self, chat: Chat, user: User | None) -> None:
        """`note`, for a handler that awaits its steps."""
        self.note(chat, user)

    def _due(self) -> None:
        self._timer = None
        if self._flushing is None or self._flushing.done():
            self._flushing = asyncio.create_task(self._flush(), name="bot:members")
        elif self._pending:  # one flush at a time: the next after this one
            self._timer = asyncio.get_running_loop().call_later(self.flush_s, self._due)

    async def _flush(self) -> None:
        batch, self._pending = self._pending, {}
        if not batch:
            return
        self.flushes += 1
        try:
            await self.group.seen_many(batch)
        except Exception as exc:  # best effort, off every update's path: logged and counted
            OUTAGES.swallow(exc, "the bot", f"{len(batch)} members not noted")

    async def flush(self) -> None:
        """Write the notes waiting now (after the flush under way, if one is)."""
        if self._flushing is not None and not self._flushing.done():
            await asyncio.shield(self._flushing)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._flushing = asyncio.create_task(self._flush(), name="bot:members")
        await asyncio.shield(self._flushing)

    async def close(self) -> None:
        """The bot stops: what waits is written now."""
        await self.flush()

    def tapper(self, chat: Chat, user: User) -> Callable[[Any], None] | None:
        """The note of a tapper in a group, to ride in the tap rate's round trip (None
        elsewhere)."""
        if not _person_in_group(chat, user):
            return None
        return functools.partial(
            self.group.add_to, chat_id=chat.id, user_id=user.id, now=self._clock()
        )

    async def changed(self, change: ChatMemberUpdated) -> None:
        """A chat_member update: a person who joined a group is one of its members, one who
        left (or was removed) is no longer."""
        chat, member = change.chat, change.new_chat_member
        user = member.user
        if not _person_in_group(chat, user):
            return
        if _in(member):
            self.note(chat, user)
            return
        # Not written back by a note of before the leave: dropped, or written first.
        self._pending.pop((chat.id, user.id), None)
        if self._flushing is not None and not self._flushing.done():
            await asyncio.shield(self._flushing)
        try:
            await self.group.forget(chat.id, user.id)
        except Exception as exc:
            if not is_outage(exc):
                raise
            OUTAGES.swallow(exc, "the bot", f"chat {chat.id}: a member who left not forgotten")

    async def of(self, chat_id: int, now: datetime) -> list[int]:
        """The group's members seen lately, as of `now` (the daily's group board), the notes
        waiting in this process written first."""
        await self.flush()
        return await self.group.of(chat_id, now)
