"""Who the bot sees in a group, for the daily's group board (bot/daily.py reads them; the set
in Redis is posting/members.py's).

Noted off a guess's path, with no SQL: the sender of a command once its answer budget was
spent (`incoming.paid_sender`; a command past the budget notes nobody, so it still costs one
Redis call), a tapper in the tap rate's own round trip (bot/taps.py), and a join, from the
chat_member updates Telegram sends a bot that administers the group (a leave forgets). A
guesser needs no note: the worker writes their player row with the guess, which the board
reads. Noting is best effort: with Redis out, the command is answered all the same.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import datetime
from typing import Any

from telegram import Chat, ChatMember, ChatMemberUpdated, User
from telegram.constants import ChatMemberStatus, ChatType

from codemojex.outages import OUTAGES, is_outage
from codemojex.posting.members import GroupMembers

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

    def __init__(self, group: GroupMembers, clock: Callable[[], datetime]) -> None:
        self.group = group  # the sets in Redis
        self._clock = clock

    async def seen(self, chat: Chat, user: User | None) -> None:
        """`user` was seen in `chat` now (nothing unless a person in a group)."""
        if not _person_in_group(chat, user):
            return
        assert user is not None
        try:
            await self.group.seen(chat.id, user.id, self._clock())
        except Exception as exc:
            if not is_outage(exc):
                raise
            OUTAGES.swallow(exc, "the bot", f"chat {chat.id}: a member not noted")

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
            await self.seen(chat, user)
            return
        try:
            await self.group.forget(chat.id, user.id)
        except Exception as exc:
            if not is_outage(exc):
                raise
            OUTAGES.swallow(exc, "the bot", f"chat {chat.id}: a member who left not forgotten")

    async def of(self, chat_id: int, now: datetime) -> list[int]:
        """The group's members seen lately, as of `now` (the daily's group board)."""
        return await self.group.of(chat_id, now)
