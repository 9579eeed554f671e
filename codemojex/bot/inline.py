"""The per-user rate of inline queries (the Share button's), in Redis, shared by every bot
process: at most `InlineRate.most` answered per window, the rest ignored before anything is
read (an inline query needs no answer; Telegram shows the asker nothing)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from codemojex.state.keys import Keys
from codemojex.values.redistypes import AnyRedis

# A user's inline queries answered per window, the rest ignored before any read: a person
# typing stays well under it.
INLINE_RATE_MAX: Final = 10
INLINE_RATE_WINDOW_MS: Final = 10_000


@dataclass(frozen=True, slots=True)
class InlineRate:
    """At most `most` inline queries per `window_ms` per user (tests may set their own)."""

    most: int = INLINE_RATE_MAX
    window_ms: int = INLINE_RATE_WINDOW_MS


class InlineQueries:
    """The users' inline query counts (a fixed window per user: one counter that expires)."""

    def __init__(self, redis: AnyRedis, queue: str, rate: InlineRate | None = None) -> None:
        self._redis = redis
        self._keys = Keys(queue)
        self.rate = rate or InlineRate()

    async def admit(self, user_id: int) -> bool:
        """Whether the user's query is within the rate; it counts either way, so a flood
        stays refused until its window ends. One round trip."""
        key = self._keys.inline_rate(user_id)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.set(key, 0, nx=True, px=self.rate.window_ms)
            pipe.incr(key)
            _, count = await pipe.execute()
        return int(count) <= self.rate.most
