"""Posting pace shared by every process that posts for the bot, kept in Redis.

Telegram allows about one message a second per chat, about twenty a minute in a
group, and about thirty a second for the whole bot. Every sender process asks the
same Redis before each post, so two worker processes never add up to twice the pace.

Why a small Lua script and not the `limits` library (which we checked: its async
Redis storage can share a redis.asyncio connection pool and runs on fakeredis):
- `limits` windows are whole seconds (the Lua side calls EXPIRE), so it cannot keep
  the safety margin we need: a post granted at exactly 1.000 s after the previous
  one can reach Telegram (or the stand-in, which enforces the limit) 0.995 s after
  it when the earlier request was slower on the wire.
- a post must fit every window at once (chat 1/s, chat 20/min, bot 30/s) plus any
  `RetryAfter` block; with `limits` that is several round trips and a hit taken in
  one window is not given back when the next refuses. The script checks all windows
  and the blocks and takes a slot in all of them atomically, or in none.
- the script reads the clock of the Redis server (TIME), so hosts with skewed
  clocks still agree on the pace; and it answers with the wait, so a sender sleeps
  exactly that long instead of polling.

Each window is a sliding log: a sorted set of the last `limit` posts. A post is allowed
when the `limit`-th newest entry is older than the window. An entry is stamped when the
slot is granted and stamped again when the post is answered (`settle`): the gap is then
measured from the answer, which comes after Telegram received the post, so however slow
one request is, two posts never reach Telegram closer together than the window allows.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from codemojex.redistypes import AnyRedis

_ACQUIRE: Final = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = tonumber(ARGV[1])
local token = ARGV[2]
local wait = 0
for i = 1, n do
  local limit = tonumber(ARGV[2 * i + 1])
  local win = tonumber(ARGV[2 * i + 2])
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now - win)
  if redis.call('ZCARD', KEYS[i]) >= limit then
    local entry = redis.call('ZRANGE', KEYS[i], -limit, -limit, 'WITHSCORES')
    local w = tonumber(entry[2]) + win - now
    if w > wait then wait = w end
  end
end
for j = n + 1, #KEYS do
  local until_ms = redis.call('GET', KEYS[j])
  if until_ms then
    local w = tonumber(until_ms) - now
    if w > wait then wait = w end
  end
end
if wait > 0 or token == '' then
  return wait
end
for i = 1, n do
  local limit = tonumber(ARGV[2 * i + 1])
  local win = tonumber(ARGV[2 * i + 2])
  redis.call('ZADD', KEYS[i], now, token)
  redis.call('ZREMRANGEBYRANK', KEYS[i], 0, -(limit + 1))
  redis.call('PEXPIRE', KEYS[i], win + 60000)
end
return 0
"""

# After the post: the grant's entries take the time the post was answered, which is after
# Telegram received it. The next post is measured from there, so a slow request can never
# make two posts arrive closer together than the window.
_SETTLE: Final = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for i = 1, #KEYS do
  if redis.call('ZSCORE', KEYS[i], ARGV[1]) then
    redis.call('ZADD', KEYS[i], 'XX', now, ARGV[1])
  end
end
return 0
"""

# Sets a block ("nobody posts here before <until>") that only ever moves later.
_BLOCK: Final = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local until_ms = now + tonumber(ARGV[1])
local cur = redis.call('GET', KEYS[1])
if cur and tonumber(cur) >= until_ms then
  return 0
end
redis.call('SET', KEYS[1], until_ms, 'PX', tonumber(ARGV[1]) + 1000)
return 1
"""


@dataclass(frozen=True, slots=True)
class Window:
    """At most `limit` posts in any `window_ms` milliseconds."""

    limit: int
    window_ms: int


@dataclass(frozen=True, slots=True)
class Grant:
    """A slot taken for one post to `chat_id`."""

    chat_id: int
    token: str = field(default_factory=lambda: uuid.uuid4().hex)


@dataclass(frozen=True, slots=True)
class PacePolicy:
    """The windows a post must fit in. The defaults are Telegram's published pace plus a
    margin (`margin_ms` on every window) for the time a request spends on the wire."""

    chat: tuple[Window, ...] = (Window(1, 1000),)
    # Groups: 20 a minute, smoothed by an intermediate window so that a busy room
    # posts every few seconds instead of 20 quick posts then 40 silent seconds. The
    # sender stops at 16 of the 20: the bot's own answers (a "slow down" to a flooding
    # player) share these windows with a limit of 20 (bot/replies.py), so a flooded room
    # whose results fill its minute still has room for them.
    group: tuple[Window, ...] = (Window(1, 1000), Window(4, 15_000), Window(16, 60_000))
    bot: tuple[Window, ...] = (Window(30, 1000),)
    margin_ms: int = 100


class Pacer:
    """Grants posting slots per chat and for the whole bot, shared through Redis.

    Keys live under `cmx:{<namespace>}:pace:*` (one hash slot, so the script is atomic
    on a cluster too). Chat ids are Telegram integers formatted with %d: no user text
    reaches a key name.
    """

    def __init__(
        self,
        redis: AnyRedis,
        namespace: str,
        policy: PacePolicy | None = None,
    ) -> None:
        self._redis = redis
        self._prefix = f"cmx:{{{namespace}}}:pace"
        self.policy = policy or PacePolicy()
        self._acquire = redis.register_script(_ACQUIRE)
        self._block = redis.register_script(_BLOCK)
        self._settle = redis.register_script(_SETTLE)

    def _windows(self, chat_id: int) -> list[tuple[str, Window]]:
        # Telegram group and supergroup chat ids are negative; private chats positive.
        per_chat = self.policy.group if chat_id < 0 else self.policy.chat
        out = [(f"{self._prefix}:c:{chat_id:d}:{i}", w) for i, w in enumerate(per_chat)]
        out += [(f"{self._prefix}:g:{i}", w) for i, w in enumerate(self.policy.bot)]
        return out

    def _block_keys(self, chat_id: int) -> list[str]:
        return [f"{self._prefix}:block:c:{chat_id:d}", f"{self._prefix}:block:g"]

    async def try_acquire(self, chat_id: int, grant: Grant | None = None) -> int:
        """Take a slot for one post to `chat_id` now (returns 0, and `grant`, if given,
        names it for `settle`), or return the milliseconds to wait (nothing taken)."""
        grant = grant or Grant(chat_id)
        windows = self._windows(chat_id)
        keys = [k for k, _ in windows] + self._block_keys(chat_id)
        args: list[int | str] = [len(windows), grant.token]
        for _, w in windows:
            args += [w.limit, w.window_ms + self.policy.margin_ms]
        return int(await self._acquire(keys=keys, args=args))

    async def wait_ms(self, chat_id: int) -> int:
        """How long until a post to `chat_id` would be granted (0: now). Takes nothing."""
        windows = self._windows(chat_id)
        keys = [k for k, _ in windows] + self._block_keys(chat_id)
        args: list[int | str] = [len(windows), ""]
        for _, w in windows:
            args += [w.limit, w.window_ms + self.policy.margin_ms]
        return int(await self._acquire(keys=keys, args=args))

    async def acquire(self, chat_id: int, *, deadline: float | None = None) -> Grant | None:
        """Wait for a slot for one post to `chat_id`; `settle` it once the post is answered.
        None if `deadline` (time.monotonic()) passes first: the caller re-checks its lease
        and comes back."""
        grant = Grant(chat_id)
        while True:
            wait_ms = await self.try_acquire(chat_id, grant)
            if wait_ms <= 0:
                return grant
            pause = wait_ms / 1000
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                pause = min(pause, left)
            await asyncio.sleep(pause)

    async def settle(self, grant: Grant) -> None:
        """The post of `grant` was answered (accepted or not): measure the next from now."""
        keys = [k for k, _ in self._windows(grant.chat_id)]
        await self._settle(keys=keys, args=[grant.token])

    async def block_chat(self, chat_id: int, ms: int) -> None:
        """Nobody posts to this chat for `ms` (Telegram answered RetryAfter for it)."""
        await self._block(keys=[self._block_keys(chat_id)[0]], args=[max(1, ms)])

    async def block_bot(self, ms: int) -> None:
        """Nobody posts anywhere for `ms` (a RetryAfter that is not about one chat)."""
        await self._block(keys=[self._block_keys(0)[1]], args=[max(1, ms)])

    def keys_for(self, chat_ids: Sequence[int]) -> list[str]:
        """Every key this pacer may touch for these chats (for cleanup in tests/tools)."""
        out: list[str] = []
        for chat_id in chat_ids:
            out += [k for k, _ in self._windows(chat_id)] + self._block_keys(chat_id)
        return out
