"""A group's members as the bot saw them: whom `/daily` in a group counts as its members.

A group's players are known from their rows (the worker writes one with a player's first
guess). This keeps the others the bot has seen there: whoever ran a command (noted once the
command's answer budget was spent: an answer past the budget notes nobody, so a spammer costs
one Redis call a command), tapped a round's keyboard (noted in the tap rate's own round trip),
or joined (a chat_member update, which Telegram sends a bot that administers the group; a
leave forgets). Plain chatter and guesses note nothing: they cost no storage round trip, and a
guesser is on the board by their player row.

In Redis (`cmx:{q}:members:<chat>`, posting/keys.py): a sorted set of user ids scored by when
each was last seen (ms, on the caller's clock: the bot's, which the tests move). Bounded: each
note keeps the `most` last seen (DAILY.group_members_max). Expiring: a member not seen for `ttl_s`
(DAILY.group_members_ttl_s) is no longer read, and the set goes with its last member's time. A note
is three commands in one MULTI (atomic: the set never exceeds its bound or outlives its TTL),
and can ride in a pipeline the caller sends anyway (`add_to`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from codemojex.limits import DAILY
from codemojex.posting.keys import Keys
from codemojex.redistypes import AnyRedis


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


class GroupMembers:
    """The groups' members of one queue (`cmx:` keys)."""

    def __init__(
        self,
        redis: AnyRedis,
        queue: str,
        *,
        most: int = DAILY.group_members_max,
        ttl_s: int = DAILY.group_members_ttl_s,
    ) -> None:
        if most < 1 or ttl_s < 1:
            raise ValueError("a group keeps at least one member, for at least a second")
        self._redis = redis
        self._keys = Keys(queue)
        self.most = most
        self.ttl_ms = ttl_s * 1000

    def add_to(self, pipe: Any, chat_id: int, user_id: int, now: datetime) -> None:
        """Queue the note "`user_id` seen in `chat_id` at `now`" on `pipe` (a MULTI pipeline
        of the caller's: the note costs no round trip of its own)."""
        key = self._keys.group_members(chat_id)
        pipe.zadd(key, {str(int(user_id)): _ms(now)})
        pipe.zremrangebyrank(key, 0, -self.most - 1)  # all but the `most` last seen
        pipe.pexpire(key, self.ttl_ms)

    async def seen(self, chat_id: int, user_id: int, now: datetime) -> None:
        """`user_id` was seen in the group `chat_id` at `now`."""
        async with self._redis.pipeline(transaction=True) as pipe:
            self.add_to(pipe, chat_id, user_id, now)
            await pipe.execute()

    async def forget(self, chat_id: int, user_id: int) -> None:
        """`user_id` left the group."""
        await self._redis.zrem(self._keys.group_members(chat_id), str(int(user_id)))

    async def of(self, chat_id: int, now: datetime) -> list[int]:
        """The group's members seen within the TTL before `now`, the last seen first (at most
        `most`)."""
        since = _ms(now) - self.ttl_ms
        found = await self._redis.zrevrangebyscore(
            self._keys.group_members(chat_id), "+inf", f"({since}"
        )
        return [int(uid) for uid in found if isinstance(uid, bytes | str)]
