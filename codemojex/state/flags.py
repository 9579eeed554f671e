"""Notices a player gets once per episode, not once per message: "slow down" while their lane
is full, "scoring is paused" while the room is paused. A flag in Redis with a TTL.

The flag lives beside the queue's keys (same hash tag, its own `cmx:` prefix so the lanes
library never sees it; the name is built by state/keys.py from the player's branded id
only). An episode is the time the flag lives: the first occurrence sets it and gets the
notice, later ones within the TTL stay silent.
"""

from __future__ import annotations

from typing import Final

from codemojex.state.keys import Keys, Notice
from codemojex.values.redistypes import AnyRedis

__all__ = ["FloodNotices", "Notice"]

# A "slow down" or "scoring is paused" notice is given once per this long per player.
NOTICE_EPISODE_S: Final = 60


class FloodNotices:
    def __init__(self, redis: AnyRedis, queue: str, *, ttl_s: int = NOTICE_EPISODE_S) -> None:
        self._redis = redis
        self._keys = Keys(queue)
        self._ttl_s = ttl_s

    async def first_of_episode(self, lane: str, notice: Notice = "flood") -> bool:
        """True for the first occurrence in an episode: the caller tells the player."""
        created = await self._redis.set(
            self._keys.notice(lane, notice), b"1", nx=True, ex=self._ttl_s
        )
        return bool(created)

    async def forget(self, lane: str, notice: Notice = "flood") -> None:
        """The notice could not be delivered: let the next occasion try again."""
        await self._redis.delete(self._keys.notice(lane, notice))
