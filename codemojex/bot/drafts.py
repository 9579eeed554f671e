"""A player's tapped drafts, the tap rate and the callback queries seen, in Redis: the state of
tap to guess (codemojex.bot.taps) that every bot process shares. Key names: posting/keys.py."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from codemojex.game import taps
from codemojex.limits import BOT, LANES
from codemojex.posting.keys import Keys
from codemojex.redistypes import AnyRedis


@dataclass(frozen=True, slots=True)
class TapRate:
    """At most `most` taps per `window_ms` per user (tests may set their own)."""

    most: int = BOT.tap_rate_max
    window_ms: int = BOT.tap_rate_window_ms


class Drafts:
    """Drafts, the tap rate and the callback ids seen, in Redis (one queue's `cmx:` keys)."""

    def __init__(self, redis: AnyRedis, queue: str, rate: TapRate | None = None) -> None:
        self._redis = redis
        self._keys = Keys(queue)
        self.rate = rate or TapRate()

    async def admit(
        self,
        user_id: int,
        query_id: str,
        seen_s: int = LANES.dedupe_window_s_default,
        *,
        also: Callable[[Any], None] | None = None,
    ) -> tuple[bool, bool]:
        """(within the rate, first sight of this callback query). A refused tap counts
        against the rate too, so hammering stays refused, and leaves nothing else behind:
        only a tap within the rate is marked seen (a second round trip, for it alone), for
        `seen_s` (the dedupe window: Telegram sends an unconfirmed update again within
        minutes, a bot restarting or a webhook retried). `also(pipe)` queues more commands in
        the rate's round trip (the tapper seen in the group: bot/members.py)."""
        rate_key = self._keys.tap_rate(user_id)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.set(rate_key, 0, nx=True, px=self.rate.window_ms)
            pipe.incr(rate_key)
            if also is not None:
                also(pipe)
            _, count, *_ = await pipe.execute()
        if int(count) > self.rate.most:
            return False, False
        first = await self._redis.set(self._keys.tap_seen(query_id), 1, nx=True, ex=seen_s)
        return True, bool(first)

    async def get(self, round_id: int, user_id: int) -> bytes | None:
        value = await self._redis.get(self._keys.tap_draft(round_id, user_id))
        return value if isinstance(value, bytes | None) else str(value).encode()

    async def put(
        self, round_id: int, user_id: int, draft: tuple[int, ...], expires_at: datetime
    ) -> None:
        key = self._keys.tap_draft(round_id, user_id)
        if not draft:
            await self._redis.delete(key)
            return
        # Gone with the round: a round closed early leaves it to time out, refused meanwhile.
        expiry_ms = int(expires_at.timestamp() * 1000)
        await self._redis.set(key, taps.draft_text(draft), pxat=expiry_ms)
