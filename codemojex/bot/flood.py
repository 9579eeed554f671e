"""Tell a flooding player to slow down once per flood episode: a flag in Redis with a TTL.

The flag lives beside the queue's keys (same hash tag, its own `cmx:` prefix so the lanes
library never sees it) and its name is built from the player's branded id only: user text
never reaches a key name. A flood episode is the time the flag lives: the first refused
guess sets it and gets the notice, later refusals within the TTL stay silent.
"""

from __future__ import annotations

from redis.asyncio import Redis

from codemojex import ids


def flood_key(queue: str, lane: str) -> str:
    if not ids.is_valid(lane, ids.PLAYER):
        raise ValueError("flood flags are keyed by player ids only")
    return f"cmx:{{{queue}}}:flood:{lane}"


class FloodNotices:
    def __init__(self, redis: Redis, queue: str, *, ttl_s: int = 60) -> None:
        self._redis = redis
        self._queue = queue
        self._ttl_s = ttl_s

    async def first_of_episode(self, lane: str) -> bool:
        """True for the first refusal of a flood episode: the caller says "slow down"."""
        created = await self._redis.set(flood_key(self._queue, lane), b"1", nx=True, ex=self._ttl_s)
        return bool(created)
