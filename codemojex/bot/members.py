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
from typing import Any

from telegram import Chat, ChatMember, ChatMemberUpdated, User
from telegram.constants import ChatMemberStatus, ChatType

from codemojex.bot.context import BotServices
from codemojex.outages import OUTAGES, is_outage

GROUPS = frozenset({ChatType.GROUP, ChatType.SUPERGROUP})
_IN = frozenset({ChatMemberStatus.MEMBER, ChatMemberStatus.ADMINISTRATOR, ChatMemberStatus.OWNER})


def _person_in_group(chat: Chat, user: User | None) -> bool:
    return user is not None and not user.is_bot and chat.type in GROUPS


async def seen(services: BotServices, chat: Chat, user: User | None) -> None:
    """`user` was seen in `chat` now (nothing unless a person in a group)."""
    if not _person_in_group(chat, user):
        return
    assert user is not None
    try:
        await services.members.seen(chat.id, user.id, services.clock())
    except Exception as exc:
        if not is_outage(exc):
            raise
        OUTAGES.swallow(exc, "the bot", f"chat {chat.id}: a member not noted")


def tapper_seen(services: BotServices, chat: Chat, user: User) -> Callable[[Any], None] | None:
    """The note of a tapper in a group, to ride in the tap rate's round trip (None elsewhere)."""
    if not _person_in_group(chat, user):
        return None
    return functools.partial(
        services.members.add_to, chat_id=chat.id, user_id=user.id, now=services.clock()
    )


def _in(member: ChatMember) -> bool:
    if member.status == ChatMemberStatus.RESTRICTED:  # restricted, in the group or not
        return bool(getattr(member, "is_member", False))
    return member.status in _IN


async def member_changed(services: BotServices, change: ChatMemberUpdated) -> None:
    """A chat_member update: a person who joined a group is one of its members, one who left
    (or was removed) is no longer."""
    chat, member = change.chat, change.new_chat_member
    user = member.user
    if not _person_in_group(chat, user):
        return
    if _in(member):
        await seen(services, chat, user)
        return
    try:
        await services.members.forget(chat.id, user.id)
    except Exception as exc:
        if not is_outage(exc):
            raise
        OUTAGES.swallow(exc, "the bot", f"chat {chat.id}: a member who left not forgotten")
