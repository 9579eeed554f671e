"""The posting pace kept in this process alone (monotonic clock): the fallback while Redis
cannot be asked, and the book of this process's own grants (pacer.py says how each is used)."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Final

from codemojex.posting.pace_policy import Grant, PacePolicy, Wait


@dataclass(slots=True)
class _Stamp:
    """A grant in one of LocalPace's logs: when it counts from (ms), and its token."""

    at: float
    token: str
    alone: bool = False  # made while Redis could not be asked: the other processes never saw it


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
        # The bot's limit this process keeps its own grants to: its kind's share of the
        # learned rate, as Redis last answered it (the Pacer sets it).
        self.bot_limit = policy.own_bot_limit
        # A bot-wide 429: nothing of this process posts before then (ms).
        self._bot_block = 0.0
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
        pace_policy.ANSWER_GROUP_RESERVE: the results may have used the rest of the minute)."""
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
        limit = self.bot_limit
        blocked = self._bot_block - now
        self._bot = deque(e for e in self._bot if e.at > now - p.bot_window_ms)
        if len(self._bot) < limit:
            return blocked
        at = sorted(e.at for e in self._bot)[-limit]
        return max(blocked, float(p.bot_window_ms) if at > now else at + p.bot_window_ms - now)

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

    def block_bot(self, ms: int) -> None:
        """Nothing of this process posts for `ms` (a 429 the bot's own pace explains)."""
        self._bot_block = max(self._bot_block, self._now() + ms)

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
