"""Notices a player gets once per episode, not once per message: "slow down" while their lane
is full, "scoring is paused" while the room is paused (`FloodNotices`), "the game is catching
up" while an outage holds their updates (`CatchingUp`). A flag in Redis with a TTL.

The flag lives beside the queue's keys (same hash tag, its own `cmx:` prefix so the lanes
library never sees it; the name is built by state/keys.py from the player's branded id
only). An episode is the time the flag lives: the first occurrence sets it and gets the
notice, later ones within the TTL stay silent.
"""

from __future__ import annotations

import time
from typing import Final

from codemojex.outages import OUTAGES
from codemojex.state.keys import Keys, Notice
from codemojex.values.redistypes import AnyRedis

__all__ = ["CatchingUp", "FloodNotices", "Notice"]

# A "slow down" or "scoring is paused" notice is given once per this long per player.
NOTICE_EPISODE_S: Final = 60
# "Catching up" is said once per member and chat while an outage holds their updates: the
# flag lives this long after the last try of theirs that an outage held (a held update is
# tried at least every RETRIES.update.cap_s), so a long outage says it once and the next
# outage again. While Redis is out, each process keeps its own flags, at most so many.
CATCHING_UP_S: Final = 60
CATCHING_UP_LOCAL_MAX: Final = 10_000


class FloodNotices:
    def __init__(self, redis: AnyRedis, queue: str, *, ttl_s: int = NOTICE_EPISODE_S) -> None:
        self._redis = redis
        self._keys = Keys(queue)
        self._ttl_s = ttl_s

    async def first_of_episode(self, lane: str, notice: Notice = "flood", *, update: str) -> bool:
        """True for the first occurrence in an episode: the caller tells the player. `update`:
        the update it occurs in (a guess's job id), True again when that update is tried
        again (its first try's notice may not have gone out)."""
        mark = update.encode()
        before = await self._redis.set(
            self._keys.notice(lane, notice), mark, nx=True, ex=self._ttl_s, get=True
        )
        return before is None or before in (mark, update)

    async def forget(self, lane: str, notice: Notice = "flood") -> None:
        """The notice could not be delivered: let the next occasion try again."""
        await self._redis.delete(self._keys.notice(lane, notice))


class CatchingUp:
    """Whether a member is yet to hear, in a chat, that an outage holds their updates: once
    per outage in every process together (a flag in Redis, `cmx:{q}:waiting:<chat>:<member>`)."""

    def __init__(self, redis: AnyRedis, queue: str, *, ttl_s: int = CATCHING_UP_S) -> None:
        self._redis = redis
        self._keys = Keys(queue)
        self._ttl_s = ttl_s
        self._local: dict[tuple[int, int], float] = {}  # while Redis is out: -> until when

    async def first(self, chat_id: int, member_id: int) -> bool:
        """True for the member's first try held by this outage (the caller tells them); each
        later one keeps the flag alive, so a long outage tells them once."""
        key = self._keys.catching_up(chat_id, member_id)
        try:
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.set(key, b"1", nx=True, ex=self._ttl_s)
                pipe.expire(key, self._ttl_s)
                created, _ = await pipe.execute()
        except Exception as exc:
            if OUTAGES.failed(exc, "the catching-up notices") != "redis":
                raise
            return self._first_here((chat_id, member_id))
        # Kept here too: an outage that reaches the flag on some tries and not on others (a
        # slot migrating, a failover) tells the member once, whichever way each try went.
        return self._first_here((chat_id, member_id)) and bool(created)

    def _first_here(self, member: tuple[int, int]) -> bool:
        now = time.monotonic()
        if self._local.get(member, 0.0) > now:
            self._local[member] = now + self._ttl_s
            return False
        if len(self._local) >= CATCHING_UP_LOCAL_MAX:  # bounded: forget those run out, or all
            self._local = {m: t for m, t in self._local.items() if t > now}
            if len(self._local) >= CATCHING_UP_LOCAL_MAX:
                self._local.clear()
        self._local[member] = now + self._ttl_s
        return True
