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
- the script (lua/pace_acquire.lua) reads the clock of the Redis server (TIME), so
  hosts with skewed clocks still agree on the pace; and it answers with the wait, so a
  sender sleeps exactly that long instead of polling.

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
from dataclasses import dataclass, field

from codemojex.limits import PACE_BOT_PER_S, PACE_CHAT_PER_S, PACE_MARGIN_MS
from codemojex.posting import scripts
from codemojex.posting.keys import Keys
from codemojex.redistypes import AnyRedis


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

    chat: tuple[Window, ...] = (Window(PACE_CHAT_PER_S, 1000),)
    # Groups: 20 a minute, smoothed by an intermediate window so that a busy room
    # posts every few seconds instead of 20 quick posts then 40 silent seconds. The
    # sender stops at 16 of the 20: the bot's own answers (a "slow down" to a flooding
    # player) share these windows with a limit of 20 (bot/replies.py), so a flooded room
    # whose results fill its minute still has room for them.
    group: tuple[Window, ...] = (
        Window(PACE_CHAT_PER_S, 1000),
        Window(4, 15_000),
        Window(16, 60_000),
    )
    bot: tuple[Window, ...] = (Window(PACE_BOT_PER_S, 1000),)
    margin_ms: int = PACE_MARGIN_MS


class Pacer:
    """Grants posting slots per chat and for the whole bot, shared through Redis.

    Keys live under `cmx:{<namespace>}:pace:*` (posting/keys.py; one hash slot, so the
    scripts are atomic on a cluster too).
    """

    def __init__(
        self,
        redis: AnyRedis,
        namespace: str,
        policy: PacePolicy | None = None,
    ) -> None:
        self._keys = Keys(namespace)
        self.policy = policy or PacePolicy()
        self._acquire = scripts.register(redis, "pace_acquire")
        self._block = scripts.register(redis, "pace_block")
        self._settle = scripts.register(redis, "pace_settle")

    def _windows(self, chat_id: int) -> list[tuple[str, Window]]:
        # Telegram group and supergroup chat ids are negative; private chats positive.
        per_chat = self.policy.group if chat_id < 0 else self.policy.chat
        out = [(self._keys.chat_window(chat_id, i), w) for i, w in enumerate(per_chat)]
        out += [(self._keys.bot_window(i), w) for i, w in enumerate(self.policy.bot)]
        return out

    async def _ask(self, chat_id: int, token: str) -> int:
        """pace_acquire: take a slot named `token` (0) or say how long to wait; an empty
        token only asks."""
        windows = self._windows(chat_id)
        keys = [k for k, _ in windows] + [self._keys.chat_block(chat_id), self._keys.bot_block]
        args: list[int | str] = [len(windows), token]
        for _, w in windows:
            args += [w.limit, w.window_ms + self.policy.margin_ms]
        return int(await self._acquire(keys=keys, args=args))

    async def try_acquire(self, chat_id: int, grant: Grant | None = None) -> int:
        """Take a slot for one post to `chat_id` now (returns 0, and `grant`, if given,
        names it for `settle`), or return the milliseconds to wait (nothing taken)."""
        return await self._ask(chat_id, (grant or Grant(chat_id)).token)

    async def wait_ms(self, chat_id: int) -> int:
        """How long until a post to `chat_id` would be granted (0: now). Takes nothing."""
        return await self._ask(chat_id, "")

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
        await self._block(keys=[self._keys.chat_block(chat_id)], args=[max(1, ms)])

    async def block_bot(self, ms: int) -> None:
        """Nobody posts anywhere for `ms` (a RetryAfter that is not about one chat)."""
        await self._block(keys=[self._keys.bot_block], args=[max(1, ms)])
