"""Notices a player gets once per episode, not once per message: "slow down" while their lane
is full, "scoring is paused" while the room is paused. A flag in Redis with a TTL.

The flag lives beside the queue's keys (same hash tag, its own `cmx:` prefix so the lanes
library never sees it) and its name is built from the player's branded id only: user text
never reaches a key name. An episode is the time the flag lives: the first occurrence sets it
and gets the notice, later ones within the TTL stay silent.
"""

from __future__ import annotations

from typing import Literal

from codemojex import ids
from codemojex.redistypes import AnyRedis

Notice = Literal["flood", "paused"]


def flood_key(queue: str, lane: str, notice: Notice = "flood") -> str:
    if not ids.is_valid(lane, ids.PLAYER):
        raise ValueError("notice flags are keyed by player ids only")
    if notice not in ("flood", "paused"):
        raise ValueError(f"unknown notice {notice!r}")
    return f"cmx:{{{queue}}}:{notice}:{lane}"


class FloodNotices:
    def __init__(self, redis: AnyRedis, queue: str, *, ttl_s: int = 60) -> None:
        self._redis = redis
        self._queue = queue
        self._ttl_s = ttl_s

    async def first_of_episode(self, lane: str, notice: Notice = "flood") -> bool:
        """True for the first occurrence in an episode: the caller tells the player."""
        key = flood_key(self._queue, lane, notice)
        created = await self._redis.set(key, b"1", nx=True, ex=self._ttl_s)
        return bool(created)

    async def forget(self, lane: str, notice: Notice = "flood") -> None:
        """The notice could not be delivered: let the next occasion try again."""
        await self._redis.delete(flood_key(self._queue, lane, notice))
