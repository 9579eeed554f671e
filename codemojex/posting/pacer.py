"""Posting pace shared by every process that posts for the bot, kept in Redis.

Telegram allows about one message a second per chat, about twenty a minute in a group, and
about thirty a second for the whole bot (TELEGRAM's rates, the settings CODEMOJEX_PACE_*).
Every process asks the same Redis before each post, so two worker processes never add up to
twice the pace.

The limits, as `lua/pace_take.lua` keeps them, in one atomic call that reads the clock of the
Redis server (TIME: hosts with skewed clocks still agree) and answers with the wait:
- a chat's second: a GCRA (leaky bucket) with one post per interval and no burst;
- a group's minute, spread evenly: its last `limit` grants (a sorted set), the k-th newest
  at least k spacings of 60 s / limit old less a burst credit that shrinks to nothing at the
  limit-th, which must be a whole minute old (the sliding window): a room that was quiet
  posts pace_policy.GROUP_BURST messages at its second's pace, a busy one every spacing, paying its
  burst back over the minute, never the whole minute's posts at once and then silence
  (a plain GCRA with a burst, checked against the window, falls silent for 9 s a minute
  under a steady flood);
- the bot's second: a sliding log of the last `limit` grants, a grant counted as "now" while
  its post is in flight and from its answer once answered, so it needs no margin for the wire
  and sustains `limit` posts per (1 s + the time from a grant to its answer);
- a RetryAfter's block of the chat.
A post takes a slot in all of them at once or in none. The answer says how long to wait and
whether it is the chat's own limits or the bot's that bind (the sender hands a chat back to
the ring in the first case and waits its turn for the bot in the second).

Two kinds of post share these limits, each with a policy of its own (`PacePolicy`): the
results (the outbox sender: results, round announcements) and the bot's own answers
(`PacePolicy.from_rates(..., answers=True)`). Every grant is logged with its kind, so the
answers get what the results leave, never all of it, whatever a chat's members send: at most
pace_policy.ANSWER_GROUP_SHARE_PCT of a group's minute, and beyond
pace_policy.ANSWER_GROUP_RESERVE only while the minute has room for the results' part; at most
pace_policy.ANSWER_BOT_SHARE_PCT of the bot's second, and only while it has room for the
results' part; never two of a chat's seconds in a row (pace_policy.ANSWER_CHAT_GAP). A
member's spam cannot starve a result, nor spammers in many chats the
results of all.

A RetryAfter blocks the chat it answered a post to: Telegram's 429 names no other scope, and
the pace keeps the bot's second, so nothing here blocks the whole bot.

A grant is stamped when taken and stamped again when its post is answered (`settle`): the
next post is then measured from the answer, which comes after Telegram received the post, so
however slow one request is, two posts never reach Telegram closer than the limits allow.

Why not the `limits` library (checked: its async Redis storage can share a redis.asyncio
pool and runs on fakeredis): its windows are whole seconds (it calls EXPIRE), it cannot take
a slot in several limits atomically, and it has no answer-time settling.

When Redis cannot be asked, the pace falls back on `LocalPace`, the same limits kept in this
process alone (the bot's "try again" answers during a Redis outage are paced by it). Every
grant is also booked locally, so a process never exceeds the limits with its own posts even
in the moment Redis comes back without the posts made while it was away. What the other
processes cannot see is kept safe by rule: a post made alone takes a group's answers'
reserve (the results never use it), after which its process keeps off that group for the
minute; and every process posts nothing for a chat interval after Redis comes back (asking
only, meanwhile: a slot taken and not used would count as a post in flight). Answers Redis
could not be told of (`settle` in an outage) are told with the process's next take.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass
from typing import Final, Literal

from codemojex.outages import OUTAGES, is_outage
from codemojex.posting import scripts
from codemojex.posting.keys import Keys
from codemojex.posting.local_pace import LocalPace
from codemojex.posting.pace_policy import RATE_TTL_MS, Grant, PacePolicy, Wait
from codemojex.values.redistypes import AnyRedis

__all__ = ["BotPace", "Cause", "Grant", "LocalPace", "PacePolicy", "Pacer", "Wait"]

# Who binds a wait (pace_take's answer): nothing (the slot was taken), the chat, the bot.
TAKEN: Final = 0
CHAT: Final = 1
BOT: Final = 2
# What explains a 429 (pace_refused's answer): the chat's own pace, its group's, the bot's.
Cause = Literal["chat", "group", "bot"]
CAUSES: Final[tuple[Cause, ...]] = ("chat", "group", "bot")


@dataclass(frozen=True, slots=True)
class BotPace:
    """The bot's learned pace as Redis holds it (the metrics, the ops page): its rate (posts a
    second; None: not learned yet, the configured one), the 429s by cause, the cuts."""

    rate: float | None
    refused: dict[str, int]
    cuts: int


class Pacer:
    """Grants posting slots per chat and for the whole bot, shared through Redis (with a
    per-process fallback while Redis cannot be asked).

    Keys live under `cmx:{<namespace>}:pace:*` (posting/keys.py; one hash slot, so the
    scripts are atomic on a cluster too).
    """

    def __init__(
        self,
        redis: AnyRedis,
        namespace: str,
        policy: PacePolicy | None = None,
        *,
        bot: int = 0,
    ) -> None:
        """`bot` is the bot's id (keys.bot_id of its token): the bot's own limits are kept
        per bot."""
        self._keys = Keys(namespace)
        self._redis = redis
        self.bot = bot
        self.policy = policy or PacePolicy()
        self.local = LocalPace(self.policy)
        # The bot's limit (posts in its second) at the last take: the learned rate's.
        self.limit = self.policy.bot_limit
        self._take = scripts.register(redis, "pace_take")
        self._block = scripts.register(redis, "pace_block")
        self._settle = scripts.register(redis, "pace_settle")
        self._refused = scripts.register(redis, "pace_refused")

    def _keys_of(self, chat_id: int) -> list[str]:
        k, bot = self._keys, self.bot
        keys = [
            k.chat_pace(chat_id),
            k.chat_block(chat_id),
            k.bot_second(bot),
            k.chat_answers(chat_id),
            k.bot_rate(bot),
            k.bot_block(bot),
        ]
        # Telegram group and supergroup chat ids are negative; private chats positive.
        if chat_id < 0:
            keys.append(k.group_minute(chat_id))
        return keys

    def _args(self, chat_id: int, token: str) -> list[int | str]:
        p = self.policy
        args: list[int | str] = [
            p.kind,
            token,
            p.chat_interval_ms,
            p.bot_limit,
            p.bot_window_ms,
            p.flight_ms,
            p.own_bot_limit,
            p.answer_gap_ms,
            p.learned_floor,
            p.learned_ceiling,
            p.start_pm,
            p.cut_keep_pm,
            p.regain_ms,
            p.bot_burst_ms,
            RATE_TTL_MS,
        ]
        if chat_id < 0:
            args += [
                p.group_spacing_ms,
                p.group_burst,
                p.group_limit,
                p.group_window_ms + p.margin_ms,
                p.group_total,
                p.answer_reserve,
            ]
        return args

    def _token(self, grant: Grant) -> str:
        """The grant's entry in the shared logs: its kind, its chat, then its token (the chat
        tells pace_refused.lua whether the chat's own posts explain a 429)."""
        return f"{self.policy.kind}:{grant.chat_id:d}:{grant.token}"

    def _learned(self, limit: object) -> None:
        """The bot's limit the script answered with: this process's own book keeps to it."""
        self.limit = int(limit)  # type: ignore[call-overload]
        self.local.bot_limit = self.policy.own_share(self.limit)

    async def take(self, chat_id: int, grant: Grant | None = None) -> Wait:
        """Take a slot for one post to `chat_id` now (`Wait(0)`; `grant`, if given, names it
        for `settle`), or say how long to wait and who binds (nothing taken)."""
        grant = grant or Grant(chat_id)
        mine = self.local.wait(chat_id)
        if mine.ms > 0:
            return mine  # this process's own posts already fill a limit
        # While Redis is thought away, or in the quiet just after it came back, only ask: a slot
        # taken in Redis and then not used would count as a post in flight for `flight_ms`.
        asking = OUTAGES.is_open("redis") or self._quiet_ms() > 0
        token = "" if asking else self._token(grant)
        if token and self.local.unsettled:
            await self._settle_late()
        try:
            ms, who, limit = await self._take(
                keys=self._keys_of(chat_id), args=self._args(chat_id, token)
            )
        except Exception as exc:
            if not is_outage(exc):
                raise
            OUTAGES.failed(exc, "the posting pace (paced by this process alone meanwhile)")
            return self.local.take_alone(grant)
        OUTAGES.ok("redis")
        self._learned(limit)
        self.local.together()
        if (quiet := self._quiet_ms()) > 0:
            return Wait(quiet, by_bot=True)
        if not token:
            return await self.take(chat_id, grant)  # only asked; Redis is back: take
        if int(ms) > 0:
            return Wait(int(ms), int(who) == BOT)
        self.local.book(grant)
        return Wait(0)

    def _quiet_ms(self) -> int:
        """Just after Redis came back, nothing for a chat interval: another process may have
        posted alone (`LocalPace.take_alone`) a moment ago, to any chat, and Redis never saw
        it. (A group's minute needs no such pause: a post made alone takes the answers'
        reserve, which the results never use, and its process keeps off the group for the
        rest of that minute.)"""
        since = OUTAGES.since_back_s("redis")
        if since is None:
            return 0
        return max(0, math.ceil(self.policy.chat_interval_ms - since * 1000))

    async def wait(self, chat_id: int) -> Wait:
        """How long until a post to `chat_id` would be granted, and who binds. Takes nothing."""
        mine = self.local.wait(chat_id)
        try:
            ms, who, limit = await self._take(
                keys=self._keys_of(chat_id), args=self._args(chat_id, "")
            )
        except Exception as exc:
            if not is_outage(exc):
                raise
            OUTAGES.failed(exc, "the posting pace (paced by this process alone meanwhile)")
            return mine
        OUTAGES.ok("redis")
        self._learned(limit)
        shared = Wait(int(ms), int(who) == BOT)
        if (quiet := self._quiet_ms()) > shared.ms:
            shared = Wait(quiet, by_bot=True)
        return mine if mine.ms > shared.ms else shared

    async def acquire(self, chat_id: int, *, deadline: float | None = None) -> Grant | None:
        """Wait for a slot for one post to `chat_id`; `settle` it once the post is answered.
        None, at once, when the wait would end after `deadline` (time.monotonic()): a caller
        never sleeps towards a deadline it is already known to miss."""
        grant = Grant(chat_id)
        while True:
            wait = await self.take(chat_id, grant)
            if wait.ms <= 0:
                return grant
            pause = wait.ms / 1000
            if deadline is not None and time.monotonic() + pause > deadline:
                return None
            await asyncio.sleep(pause)

    async def settle(self, grant: Grant) -> None:
        """The post of `grant` was answered (accepted or not): measure the next from now. When
        Redis cannot be told, it is told with this process's next take through Redis."""
        self.local.settle(grant)
        try:
            await self._settle_shared(grant)
        except Exception as exc:
            if not is_outage(exc):
                raise
            self.local.unsettled.append(grant)

    async def _settle_shared(self, grant: Grant) -> None:
        keys = self._keys_of(grant.chat_id)
        logs = [keys[2]] + ([keys[6]] if grant.chat_id < 0 else [])
        p = self.policy
        await self._settle(
            keys=[keys[0], keys[4], *logs],
            args=[self._token(grant), p.chat_interval_ms, p.flight_ms],
        )

    async def _settle_late(self) -> None:
        """Tell Redis of the answers it missed (stamped now: later than they came, so no limit
        is broken), so that they stop counting as posts in flight."""
        unsettled = self.local.unsettled
        while unsettled:
            grant = unsettled.popleft()
            try:
                await self._settle_shared(grant)
            except Exception as exc:
                unsettled.appendleft(grant)
                if not is_outage(exc):
                    raise
                return

    async def block_chat(self, chat_id: int, ms: int) -> None:
        """Nobody posts to this chat for `ms` (Telegram answered RetryAfter for it)."""
        self.local.block(chat_id, max(1, ms))
        try:
            await self._block(keys=[self._keys.chat_block(chat_id)], args=[max(1, ms)])
        except Exception as exc:
            if not is_outage(exc):
                raise

    async def refused(self, grant: Grant, retry_after_ms: int) -> Cause:
        """Telegram answered the post of `grant` with a 429 asking to wait `retry_after_ms`.
        What explains it (pace_refused.lua): the chat's or the group's own pace (the chat is
        blocked for the wait), or neither: the bot posts faster than Telegram allows now, so
        every post of the bot waits and the learned rate is cut. While Redis cannot be asked,
        the chat is blocked in this process (the bot's own pace is Redis's to learn)."""
        ms = max(1, retry_after_ms)
        p, k, chat = self.policy, self._keys, grant.chat_id
        keys = [k.bot_second(self.bot), k.bot_rate(self.bot), k.bot_block(self.bot)]
        keys.append(k.chat_block(chat))
        if chat < 0:
            keys.append(k.group_minute(chat))
        args: list[int | str] = [
            self._token(grant),
            ms,
            p.chat_interval_ms,
            p.group_total,
            p.group_window_ms,
            p.bot_limit,
            p.learned_floor,
            p.learned_ceiling,
            p.cut_keep_pm,
            p.cut_hold_ms,
            p.bot_window_ms,
            RATE_TTL_MS,
        ]
        try:
            cause, _rate = await self._refused(keys=keys, args=args)
        except Exception as exc:
            if not is_outage(exc):
                raise
            self.local.block(chat, ms)
            return "chat"
        found = CAUSES[int(cause) - 1]
        if found == "bot":
            self.local.block_bot(ms)
        else:
            self.local.block(chat, ms)
        return found

    async def bot_pace(self) -> BotPace:
        """The bot's learned rate and its 429s by cause, as Redis holds them."""
        return await read_bot_pace(self._redis, self._keys.queue, self.bot)


async def read_bot_pace(redis: AnyRedis, namespace: str, bot: int) -> BotPace:
    """The learned pace of bot `bot` on queue `namespace` (the metrics, the ops page)."""
    raw = await redis.hgetall(Keys(namespace).bot_rate(bot))
    fields = {(k.decode() if isinstance(k, bytes) else str(k)): v for k, v in raw.items()}
    rate = fields.get("rate")
    return BotPace(
        rate=None if rate is None else float(rate),
        refused={cause: int(fields.get(cause, 0)) for cause in CAUSES},
        cuts=int(fields.get("cuts", 0)),
    )
