"""A group's members as the bot saw them: whom `/daily` in a group counts as its members.

A group's players are known from their rows (the worker writes one with a player's first
guess). This keeps the others the bot has seen there: whoever said anything there (a message
that is no guess taken, a sticker, a command), tapped a round's keyboard, or joined (a
chat_member update, which Telegram sends a bot that administers the group; a leave forgets).
The bot notes them in memory and writes them here together (bot/members.py), a tapper in the
tap rate's own round trip. A guesser is on the board by their player row.

In Redis (`cmx:{q}:members:<chat>`, state/keys.py): a sorted set of user ids scored by when
each was last seen (ms, on the caller's clock: the bot's, which the tests move). Bounded: each
note keeps the `most` last seen (MEMBERS_MAX). Expiring: a member not seen for `ttl_s`
(MEMBERS_TTL_S) is no longer read, and the set goes with its last member's time.
The notes of a group are three commands in one MULTI (atomic: the set never exceeds its bound
or outlives its TTL), and ride in a pipeline the caller sends anyway (`add_to`) or in one of
their own for many groups at once (`seen_many`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

from codemojex.state.keys import Keys
from codemojex.values.redistypes import AnyRedis

# A group's members as the bot saw them: the last seen, each forgotten this long after. 128
# keeps the set in Redis's compact encoding: about 2 kB a group.
MEMBERS_MAX: Final = 128
MEMBERS_TTL_S: Final = 30 * 24 * 3600


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


class GroupMembers:
    """The groups' members of one queue (`cmx:` keys)."""

    def __init__(
        self,
        redis: AnyRedis,
        queue: str,
        *,
        most: int = MEMBERS_MAX,
        ttl_s: int = MEMBERS_TTL_S,
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
        self._add_group(pipe, chat_id, {user_id: now})

    def _add_group(self, pipe: Any, chat_id: int, seen: Mapping[int, datetime]) -> None:
        key = self._keys.group_members(chat_id)
        pipe.zadd(key, {str(int(user_id)): _ms(when) for user_id, when in seen.items()})
        pipe.zremrangebyrank(key, 0, -self.most - 1)  # all but the `most` last seen
        pipe.pexpire(key, self.ttl_ms)

    async def seen(self, chat_id: int, user_id: int, now: datetime) -> None:
        """`user_id` was seen in the group `chat_id` at `now`."""
        await self.seen_many({(chat_id, user_id): now})

    async def seen_many(self, seen: Mapping[tuple[int, int], datetime]) -> None:
        """Each (group, user) seen at its moment: one round trip for them all (three commands
        per group, in one MULTI)."""
        by_chat: dict[int, dict[int, datetime]] = {}
        for (chat_id, user_id), when in seen.items():
            by_chat.setdefault(chat_id, {})[user_id] = when
        if not by_chat:
            return
        async with self._redis.pipeline(transaction=True) as pipe:
            for chat_id, users in by_chat.items():
                self._add_group(pipe, chat_id, users)
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
