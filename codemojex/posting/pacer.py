"""Posting pace shared by every process that posts for the bot, kept in Redis.

Telegram allows about one message a second per chat, about twenty a minute in a group, and
about thirty a second for the whole bot (settings CODEMOJEX_PACE_*). Every process asks the
same Redis before each post, so two worker processes never add up to twice the pace.

The limits, as `lua/pace_take.lua` keeps them, in one atomic call that reads the clock of the
Redis server (TIME: hosts with skewed clocks still agree) and answers with the wait:
- a chat's second: a GCRA (leaky bucket) with one post per interval and no burst;
- a group's minute, spread evenly: its last `limit` grants (a sorted set), the k-th newest
  at least k spacings of 60 s / limit (3 s) old less a burst credit that shrinks to nothing
  at the limit-th, which must be a whole minute old (the sliding window): a room that was
  quiet posts PACE_GROUP_BURST messages at its second's pace, a busy one every 3 s, paying
  its burst back over the minute, never twenty quick posts and then forty silent seconds
  (a plain GCRA with a burst, checked against the window, falls silent for 9 s a minute
  under a steady flood);
- the bot's second: a sliding log of the last `limit` grants, a grant counted as "now" while
  its post is in flight and from its answer once answered, so it needs no margin for the wire
  and sustains 30 posts per (1 s + the time from a grant to its answer);
- a RetryAfter's block of the chat.
A post takes a slot in all of them at once or in none. The answer says how long to wait and
whether it is the chat's own limits or the bot's that bind (the sender hands a chat back to
the ring in the first case and waits its turn for the bot in the second).

Two kinds of post share these limits, each with a policy of its own (`PacePolicy`): the
results (the outbox sender: results, round announcements) and the bot's own answers
(`PacePolicy.from_settings(..., answers=True)`). Every grant is logged with its kind, so the
answers get what the results leave, never all of it, whatever a chat's members send
(limits.PACE_ANSWER_*): at most a quarter of a group's minute, and beyond one a minute only
while the minute has room for the results' three quarters; at most a fifth of the bot's
second, and only while the second has room for the results' four fifths; never two of a
chat's seconds in a row. A member's spam cannot starve a result, nor spammers in many chats
the results of all.

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
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from codemojex.limits import (
    PACE_ANSWER_BOT_PCT,
    PACE_ANSWER_GAP,
    PACE_ANSWER_GROUP_PCT,
    PACE_ANSWER_RESERVE,
    PACE_BOT_PER_S,
    PACE_CHAT_PER_S,
    PACE_FLIGHT_MS,
    PACE_GROUP_BURST,
    PACE_GROUP_PER_MIN,
    PACE_MARGIN_MS,
)
from codemojex.outages import OUTAGES, is_outage
from codemojex.posting import scripts
from codemojex.posting.keys import Keys
from codemojex.redistypes import AnyRedis

if TYPE_CHECKING:
    from codemojex.settings import Settings

# Who binds a wait (pace_take's answer): nothing (the slot was taken), the chat, the bot.
TAKEN: Final = 0
CHAT: Final = 1
BOT: Final = 2


@dataclass(frozen=True, slots=True)
class Wait:
    """The answer to a take: `ms` 0 when the slot was taken; else how long until it could be,
    and whether the bot's limits (`by_bot`) rather than the chat's own bind longest."""

    ms: int
    by_bot: bool = False


@dataclass(frozen=True, slots=True)
class Grant:
    """A slot taken for one post to `chat_id`."""

    chat_id: int
    token: str = field(default_factory=lambda: uuid.uuid4().hex)


@dataclass(slots=True)
class _Stamp:
    """A grant in one of LocalPace's logs: when it counts from (ms), and its token."""

    at: float
    token: str
    alone: bool = False  # made while Redis could not be asked: the other processes never saw it


@dataclass(frozen=True, slots=True)
class PacePolicy:
    """The limits one kind of post must fit in, in milliseconds: the results (the default) or
    the bot's own answers (`answers`). The defaults are the results' share of Telegram's
    published limits. `group_limit` is this kind's share of a group's minute and `bot_share`
    the answers' of the bot's second (the results may use all of it), `group_total` and
    `bot_limit` what every post together may use (a share above them is the whole).
    `margin_ms` is added to a chat's interval and a group's sliding minute for the time a
    request spends on the wire. The bot's second counts a grant in flight as "now" instead
    (for at most `flight_ms`), so it needs no margin."""

    chat_ms: int = 1000 // PACE_CHAT_PER_S
    group_spacing_ms: int = -(-60_000 // (PACE_GROUP_PER_MIN - PACE_ANSWER_RESERVE))
    group_burst: int = PACE_GROUP_BURST
    group_limit: int = PACE_GROUP_PER_MIN - PACE_ANSWER_RESERVE
    group_window_ms: int = 60_000
    group_total: int = PACE_GROUP_PER_MIN
    bot_limit: int = PACE_BOT_PER_S
    bot_share: int = PACE_BOT_PER_S * PACE_ANSWER_BOT_PCT // 100
    bot_window_ms: int = 1000
    margin_ms: int = PACE_MARGIN_MS
    flight_ms: int = PACE_FLIGHT_MS
    # A group's posts a minute a process may make alone, while Redis is away (LocalPace).
    group_alone: int = PACE_ANSWER_RESERVE
    # The bot's own answers (else results), the ms between two of them to one chat, and how
    # many a group's minute they may post whatever the results use.
    answers: bool = False
    answer_gap_ms: int = 0
    answer_reserve: int = PACE_ANSWER_RESERVE

    @classmethod
    def from_rates(
        cls,
        chat_per_s: int = PACE_CHAT_PER_S,
        group_per_min: int = PACE_GROUP_PER_MIN,
        bot_per_s: int = PACE_BOT_PER_S,
        *,
        answers: bool = False,
        margin_ms: int = PACE_MARGIN_MS,
    ) -> PacePolicy:
        """The pace of the settings CODEMOJEX_PACE_CHAT_PER_S, _GROUP_PER_MIN, _BOT_PER_S: for
        the results (the sender), a group's minute less PACE_ANSWER_RESERVE spread evenly and
        the whole bot's second; for the bot's own answers (`answers`), no spacing but their
        share of the minute (PACE_ANSWER_GROUP_PCT) and of the bot's second
        (PACE_ANSWER_BOT_PCT), and PACE_ANSWER_GAP chat intervals between two answers to one
        chat. Both on the same keys: each sees the other's posts."""
        chat_ms = -(-1000 // chat_per_s)
        if answers:
            return cls(
                chat_ms=chat_ms,
                group_spacing_ms=0,
                group_burst=1,
                group_limit=_share(group_per_min, PACE_ANSWER_GROUP_PCT),
                group_total=group_per_min,
                bot_limit=bot_per_s,
                bot_share=_share(bot_per_s, PACE_ANSWER_BOT_PCT),
                margin_ms=margin_ms,
                answers=True,
                answer_gap_ms=PACE_ANSWER_GAP * (chat_ms + margin_ms),
            )
        share = max(1, group_per_min - PACE_ANSWER_RESERVE)
        return cls(
            chat_ms=chat_ms,
            group_spacing_ms=-(-60_000 // share),
            group_burst=min(PACE_GROUP_BURST, share),
            group_limit=share,
            group_total=group_per_min,
            bot_limit=bot_per_s,
            margin_ms=margin_ms,
        )

    @classmethod
    def from_settings(cls, settings: Settings, *, answers: bool = False) -> PacePolicy:
        return cls.from_rates(
            settings.pace_chat_per_s,
            settings.pace_group_per_min,
            settings.pace_bot_per_s,
            answers=answers,
        )

    @property
    def chat_interval_ms(self) -> int:
        return self.chat_ms + self.margin_ms

    @property
    def kind(self) -> str:
        """What a grant's token starts with in the shared logs (pace_take.lua)."""
        return "a" if self.answers else "r"

    @property
    def own_bot_limit(self) -> int:
        """What this kind may use of the bot's second."""
        return min(self.bot_limit, self.bot_share) if self.answers else self.bot_limit


def _share(limit: int, percent: int) -> int:
    return max(1, limit * percent // 100)


class LocalPace:
    """The pace's limits kept in this process alone (monotonic clock): the fallback while
    Redis cannot be asked, and the book of this process's own grants."""

    # Chats remembered at most; the oldest (long since free to post) are forgotten first.
    _MAX_CHATS: Final = 10_000

    def __init__(self, policy: PacePolicy) -> None:
        self.policy = policy
        self._chat_next: dict[int, float] = {}
        # Answers only: when the next answer to a chat may go (PacePolicy.answer_gap_ms).
        self._answer_next: dict[int, float] = {}
        self._minute: dict[int, deque[_Stamp]] = {}
        self._bot: deque[_Stamp] = deque()
        self._blocks: dict[int, float] = {}
        # Since when Redis could not be asked (ms).
        self._alone_since: float | None = None
        # Grants whose answer Redis could not be told (an outage): until it is, Redis counts
        # each as a post in flight for `flight_ms`, a slot nobody uses (Pacer.settle).
        self.unsettled: deque[Grant] = deque(maxlen=1000)

    def alone(self) -> None:
        """Redis cannot be asked: from now on (until `together`), this process cannot see the
        others' posts, so it keeps to what nobody else uses (see `take_alone`)."""
        if self._alone_since is None:
            self._alone_since = self._now()

    def together(self) -> None:
        """Redis answers again."""
        self._alone_since = None

    def take_alone(self, grant: Grant) -> Wait:
        """A slot while Redis is away. The other processes may have posted to the chat just
        before the outage and post nothing during it (the sender needs Redis for its leases),
        so: a chat's first post a chat interval after the outage began, and in a group no
        more than `group_alone` posts of this process in the sliding minute, those it made
        through Redis before the outage included (the answers' reserve,
        PACE_ANSWER_RESERVE: the results may have used the rest of the minute)."""
        self.alone()
        assert self._alone_since is not None
        p, now, chat = self.policy, self._now(), grant.chat_id
        wait = self._alone_since + p.chat_interval_ms - now
        if chat < 0:
            wait = max(wait, self._reserve_wait(self._minute.get(chat, deque()), now))
        if wait > 0:
            return Wait(int(-(-wait // 1)))
        return self._take(grant, now, alone=True)

    @staticmethod
    def _now() -> float:
        return time.monotonic() * 1000

    def _flight_wait(self, now: float) -> float:
        """This process's share of the bot's second, as `nth_wait` in pace_take.lua (a grant
        in flight is stamped `flight_ms` ahead until settled, so the log is not in time
        order). Its grants are all of its policy's kind."""
        p = self.policy
        limit = p.own_bot_limit
        self._bot = deque(e for e in self._bot if e.at > now - p.bot_window_ms)
        if len(self._bot) < limit:
            return 0.0
        at = sorted(e.at for e in self._bot)[-limit]
        return float(p.bot_window_ms) if at > now else at + p.bot_window_ms - now

    def _spread_wait(self, minute: deque[_Stamp], now: float) -> float:
        """A group's minute spread evenly, as `spread_wait` in pace_take.lua."""
        p = self.policy
        window = p.group_window_ms + p.margin_ms
        while minute and minute[0].at <= now - window:
            minute.popleft()
        wait = 0.0
        newest_first = list(reversed(minute))[: p.group_limit]
        for k, stamp in enumerate(newest_first, start=1):
            at = stamp.at
            if k >= p.group_limit:
                due = at + window
            else:
                credit = (p.group_burst - 1) * p.group_spacing_ms
                due = (
                    at + k * p.group_spacing_ms - credit * (p.group_limit - k) / (p.group_limit - 1)
                )
            wait = max(wait, due - now)
        return wait

    def _reserve_wait(self, minute: deque[_Stamp], now: float) -> float:
        """Until this process's posts in a group's sliding minute are fewer than the answers'
        reserve (`group_alone`)."""
        p = self.policy
        window = p.group_window_ms + p.margin_ms
        mine = sorted(s.at for s in minute if s.at > now - window)
        return mine[-p.group_alone] + window - now if len(mine) >= p.group_alone else 0.0

    def wait(self, chat_id: int) -> Wait:
        return self._take(Grant(chat_id, ""), self._now(), ask=True)

    def _take(self, grant: Grant, now: float, *, ask: bool = False, alone: bool = False) -> Wait:
        chat = grant.chat_id
        chat_wait = max(
            self._chat_next.get(chat, 0.0) - now,
            self._blocks.get(chat, 0.0) - now,
            self._answer_next.get(chat, 0.0) - now,
        )
        if chat < 0:
            minute = self._minute.setdefault(chat, deque())
            chat_wait = max(chat_wait, self._spread_wait(minute, now))
            # A post made alone is in no other process's view of the group's minute: it took
            # the answers' reserve, so this process keeps to the reserve until it is a minute
            # old (the results keep to the rest).
            if any(stamp.alone for stamp in minute):
                chat_wait = max(chat_wait, self._reserve_wait(minute, now))
        bot_wait = self._flight_wait(now)
        if chat_wait > 0 or bot_wait > 0 or ask:
            ms = max(0, int(-(-max(chat_wait, bot_wait) // 1)))
            return Wait(ms, bot_wait > chat_wait)
        self.book(grant, alone=alone)
        return Wait(0)

    def book(self, grant: Grant, *, alone: bool = False) -> None:
        """Take the slot of `grant` here (Redis granted it, or this is the fallback: `alone`)."""
        p, chat, now = self.policy, grant.chat_id, self._now()
        if len(self._chat_next) > self._MAX_CHATS:
            self._forget(now)
        self._chat_next[chat] = max(self._chat_next.get(chat, 0.0), now) + p.chat_interval_ms
        if p.answer_gap_ms:
            self._answer_next[chat] = now + p.answer_gap_ms
        self._bot.append(_Stamp(now + p.flight_ms, grant.token))
        if chat < 0:
            # Trimmed by age when checked (as in pace_take.lua).
            self._minute.setdefault(chat, deque()).append(_Stamp(now, grant.token, alone))

    def settle(self, grant: Grant) -> None:
        now, chat = self._now(), grant.chat_id
        self._chat_next[chat] = max(
            self._chat_next.get(chat, 0.0), now + self.policy.chat_interval_ms
        )
        for log in (self._bot, self._minute.get(chat, ())):
            for stamp in log:
                if stamp.token == grant.token:
                    stamp.at = now

    def block(self, chat_id: int, ms: int) -> None:
        until = self._now() + ms
        self._blocks[chat_id] = max(self._blocks.get(chat_id, 0.0), until)

    def _forget(self, now: float) -> None:
        horizon = now - self.policy.group_window_ms - self.policy.margin_ms
        for chat, t in list(self._chat_next.items()):
            if t < now:
                minute = self._minute.get(chat)
                if not minute or minute[-1].at < horizon:
                    self._chat_next.pop(chat, None)
                    self._minute.pop(chat, None)
        self._blocks = {c: t for c, t in self._blocks.items() if t > now}
        self._answer_next = {c: t for c, t in self._answer_next.items() if t > now}


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
    ) -> None:
        self._keys = Keys(namespace)
        self.policy = policy or PacePolicy()
        self.local = LocalPace(self.policy)
        self._take = scripts.register(redis, "pace_take")
        self._block = scripts.register(redis, "pace_block")
        self._settle = scripts.register(redis, "pace_settle")

    def _keys_of(self, chat_id: int) -> list[str]:
        k = self._keys
        keys = [k.chat_pace(chat_id), k.chat_block(chat_id), k.bot_second, k.chat_answers(chat_id)]
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
        """The grant's entry in the shared logs: its kind, then its token."""
        return f"{self.policy.kind}:{grant.token}"

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
            ms, who = await self._take(keys=self._keys_of(chat_id), args=self._args(chat_id, token))
        except Exception as exc:
            if not is_outage(exc):
                raise
            OUTAGES.failed(exc, "the posting pace (paced by this process alone meanwhile)")
            return self.local.take_alone(grant)
        OUTAGES.ok("redis")
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
            ms, who = await self._take(keys=self._keys_of(chat_id), args=self._args(chat_id, ""))
        except Exception as exc:
            if not is_outage(exc):
                raise
            OUTAGES.failed(exc, "the posting pace (paced by this process alone meanwhile)")
            return mine
        OUTAGES.ok("redis")
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
        logs = [keys[2]] + ([keys[4]] if grant.chat_id < 0 else [])
        await self._settle(
            keys=[keys[0], *logs], args=[self._token(grant), self.policy.chat_interval_ms]
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
