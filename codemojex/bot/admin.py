"""Who may run admin commands: chat administrators (cached), anonymous admins, operators."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from typing import Annotated, Final

from pydantic import Field
from telegram import Bot, ChatMemberUpdated, Message
from telegram.constants import ChatMemberStatus
from telegram.error import RetryAfter, TelegramError

from codemojex.bot.tries import Before
from codemojex.outages import outage_of
from codemojex.values.bounds import within

# How long a chat's admin list is trusted (CODEMOJEX_ADMIN_CACHE_TTL_S), and at most: where
# the bot is no admin, a demoted admin keeps acting until then (Telegram tells only admin
# bots of changes).
TTL_S: Final = 300.0
TtlS = Annotated[float, Field(gt=0, le=600.0)]

_ADMIN_STATUSES = frozenset({ChatMemberStatus.ADMINISTRATOR, ChatMemberStatus.OWNER})


class AdminCache:
    """Administrator ids per chat, asked of Telegram at most once per TTL per chat.

    A chat-member update that makes or unmakes an admin or owner calls `forget`, so a
    promotion or demotion counts at once; joins and leaves keep the list (asking again on each
    would cost a getChatAdministrators per join in a big group). The TTL, at most
    ten minutes (TtlS), covers the updates Telegram does not send: bots get chat_member
    updates only where they are administrators themselves (docs/game.md).
    """

    def __init__(
        self,
        ttl_s: float = TTL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ttl_s = within(ttl_s, TtlS, "the admin cache's ttl_s")
        self._clock = clock
        self._entries: dict[int, tuple[float, frozenset[int]]] = {}

    async def admins(self, bot: Bot, chat_id: int) -> frozenset[int]:
        now = self._clock()
        entry = self._entries.get(chat_id)
        if entry is not None and entry[0] > now:
            return entry[1]
        try:
            members = await bot.get_chat_administrators(chat_id)
        except TelegramError as exc:
            if isinstance(exc, RetryAfter) or outage_of(exc) == "telegram":
                # Nothing was done yet: the update waits it out (bot/tries.py).
                raise Before(exc) from exc
            raise
        found = frozenset(member.user.id for member in members)
        self._entries[chat_id] = (now + self._ttl_s, found)
        return found

    def forget(self, chat_id: int) -> None:
        self._entries.pop(chat_id, None)

    def note(self, change: ChatMemberUpdated) -> bool:
        """Forget the chat's list when `change` makes or unmakes an admin or owner (a change of
        an admin's rights included); True if it did."""
        statuses = {change.old_chat_member.status, change.new_chat_member.status}
        if statuses.isdisjoint(_ADMIN_STATUSES):
            return False
        self.forget(change.chat.id)
        return True


def is_anonymous_admin(message: Message) -> bool:
    """Sent "as the group": only the group's administrators can post that way."""
    return message.sender_chat is not None and message.sender_chat.id == message.chat.id


async def is_admin(
    bot: Bot, message: Message, cache: AdminCache, operator_ids: Collection[int]
) -> bool:
    if is_anonymous_admin(message):
        return True
    user = message.from_user
    if user is None or message.sender_chat is not None:
        # Posted on behalf of a channel (or with no sender at all): not a person we can check.
        return False
    if user.id in operator_ids:
        return True
    return user.id in await cache.admins(bot, message.chat.id)
