"""A player's tapped drafts, the tap rate and the callback queries seen, in Redis: the state of
tap to guess (codemojex.bot.taps) that every bot process shares. Key names: state/keys.py.

A callback query is marked seen only with its effect (`done`: the draft kept, or cleared once
the guess it completed was admitted), in one script call: a process that dies, or a handler
that fails, between the tap's arrival and its effect leaves nothing that would turn the tap's
delivery again into a silent no-op. The guess a tap completes is deduplicated by its job id,
derived from the query (`cb:<query id>`), so a tap delivered again after its guess was
admitted but before its mark is one guess still."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from codemojex.game import taps
from codemojex.lanes.facade import DEDUPE_WINDOW_S
from codemojex.state.keys import Keys
from codemojex.state.scripts import register
from codemojex.values.redistypes import AnyRedis

# A player's taps allowed per window, in every chat together (a toast past it): a thumb taps
# four or five times a second; this stops scripted hammering.
TAP_RATE_MAX: Final = 8
TAP_RATE_WINDOW_MS: Final = 2_000


@dataclass(frozen=True, slots=True)
class TapRate:
    """At most `most` taps per `window_ms` per user (tests may set their own)."""

    most: int = TAP_RATE_MAX
    window_ms: int = TAP_RATE_WINDOW_MS


class Drafts:
    """Drafts, the tap rate and the callback ids seen, in Redis (one queue's `cmx:` keys)."""

    def __init__(self, redis: AnyRedis, queue: str, rate: TapRate | None = None) -> None:
        self._redis = redis
        self._keys = Keys(queue)
        self.rate = rate or TapRate()
        self._done = register(redis, "tap_done")

    async def admit(
        self,
        user_id: int,
        query_id: str,
        *,
        also: Callable[[Any], None] | None = None,
    ) -> tuple[bool, bool]:
        """(within the rate, not yet done), in one round trip: the rate counted and the query's
        mark read, not written (`done` writes it with the tap's effect). A refused tap counts
        against the rate too, so hammering stays refused. The rate counts the taps (their
        queries), not their tries: a tap tried again, or delivered again, within the window
        counts once. `also(pipe)` queues more commands in the same round trip (the tapper seen
        in the group: bot/members.py)."""
        rate_key = self._keys.tap_rate(user_id)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.sadd(rate_key, query_id)
            pipe.pexpire(rate_key, self.rate.window_ms, nx=True)
            pipe.scard(rate_key)
            pipe.exists(self._keys.tap_seen(query_id))
            if also is not None:
                also(pipe)
            _, _, count, seen, *_ = await pipe.execute()
        if int(count) > self.rate.most:
            return False, False
        return True, not seen

    async def done(
        self,
        query_id: str,
        round_id: int,
        user_id: int,
        draft: tuple[int, ...],
        expires_at: datetime,
        seen_s: int = DEDUPE_WINDOW_S,
    ) -> bool:
        """The tap's effect and its mark together: the draft written (deleted when empty: the
        guess it completed was admitted) and the query marked seen for `seen_s` (the dedupe
        window: Telegram sends an unconfirmed update again within minutes). False, writing
        nothing, when another delivery of the query did it first."""
        # A draft goes with its round: one closed early is left to time out, refused meanwhile.
        expiry_ms = int(expires_at.timestamp() * 1000)
        done = await self._done(
            keys=[self._keys.tap_seen(query_id), self._keys.tap_draft(round_id, user_id)],
            args=[seen_s, taps.draft_text(draft) if draft else "", expiry_ms],
        )
        return bool(done)

    async def get(self, round_id: int, user_id: int) -> bytes | None:
        value = await self._redis.get(self._keys.tap_draft(round_id, user_id))
        return value if isinstance(value, bytes | None) else str(value).encode()
