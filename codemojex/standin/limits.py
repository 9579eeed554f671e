"""Faults on demand and Telegram's flood limits: what makes the stand-in say no.

Injected faults (429 storms, 5xx, lost answers, slow answers) match calls by method and chat;
the server applies the one `_take_fault` hands it. Flood limits are sliding windows measured
on arrival; a post over a limit is refused with an honest `retry_after` and recorded as a
RateViolation, which is how tests prove a sender paces itself.

The bot-wide limit (`global_per_s`) is hidden, as Telegram's is: the bot is told nothing of
it but the 429s past it, each with the wait until the window has room again, and the same
429 whichever limit refused (Telegram names no scope); only the stand-in's books
(`violations`, by `rule`) say which one it was.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from codemojex.standin.model import ApiError


@dataclass(frozen=True)
class RateViolation:
    """A call refused with 429 because the bot broke the flood limits being enforced."""

    ts: float
    method: str
    chat_id: int | None
    rule: str
    """"per_chat_per_s", "per_group_per_min" or "global_per_s"."""
    retry_after: int


@dataclass
class Fault:
    status: int
    description: str
    remaining: int | None
    until: float | None
    methods: frozenset[str] | None
    chat_id: int | None
    retry_after: int | None
    kind: str = "error"  # error | delay | lost_response
    delay_s: float = 0.0

    def matches(self, method: str, chat_id: int | None, now: float) -> bool:
        if self.until is not None and now >= self.until:
            return False
        if self.remaining is not None and self.remaining <= 0:
            return False
        if self.methods is not None and method.lower() not in self.methods:
            return False
        return self.chat_id is None or self.chat_id == chat_id


@dataclass
class RateLimits:
    per_chat_per_s: int | None
    per_group_per_min: int | None
    global_per_s: int | None
    methods: frozenset[str]
    slack_s: float
    chat_burst: int = 1


class Limits:
    """StandIn's faults and flood limits (a mixin: StandIn inherits every area)."""

    def __init__(self) -> None:
        super().__init__()
        self.violations: list[RateViolation] = []
        self.injected_errors = 0
        self._faults: list[Fault] = []
        self._limits: RateLimits | None = None
        self._chat_sends: dict[int, deque[float]] = {}
        self._global_sends: deque[float] = deque()

    def inject_429(
        self,
        count: int | None = None,
        *,
        seconds: float | None = None,
        retry_after: int = 1,
        methods: Iterable[str] | None = ("sendMessage",),
        chat_id: int | None = None,
    ) -> None:
        """Answer 429 (retry_after) to the next `count` matching calls, or to all of them for
        `seconds`; with neither, to the next one. methods=None matches every method."""
        self.inject_error(
            429,
            f"Too Many Requests: retry after {retry_after}",
            count=count,
            seconds=seconds,
            methods=methods,
            chat_id=chat_id,
            retry_after=retry_after,
        )

    def inject_error(
        self,
        status: int,
        description: str,
        *,
        count: int | None = None,
        seconds: float | None = None,
        methods: Iterable[str] | None = ("sendMessage",),
        chat_id: int | None = None,
        retry_after: int | None = None,
    ) -> None:
        """Answer `status` with `description` (e.g. 502 "Bad Gateway", 403 "Forbidden: ...")."""
        self._add_fault("error", count, seconds, methods, chat_id, status, description, retry_after)

    def inject_lost_response(
        self,
        count: int | None = None,
        *,
        seconds: float | None = None,
        methods: Iterable[str] | None = ("sendMessage",),
        chat_id: int | None = None,
    ) -> None:
        """Carry out the matching calls (the message IS posted) but drop the connection
        instead of answering: the client sees a network error and cannot know it succeeded.
        This is how a retrying sender ends up posting twice on the real Telegram."""
        self._add_fault("lost_response", count, seconds, methods, chat_id)

    def inject_latency(
        self,
        delay_s: float,
        count: int | None = None,
        *,
        seconds: float | None = None,
        methods: Iterable[str] | None = ("sendMessage",),
        chat_id: int | None = None,
    ) -> None:
        """Hold the matching calls for `delay_s` before carrying them out (a slow Telegram;
        past PTB's read timeout the client raises TimedOut although the call then succeeds)."""
        self._add_fault("delay", count, seconds, methods, chat_id, delay_s=delay_s)

    def _add_fault(
        self,
        kind: str,
        count: int | None,
        seconds: float | None,
        methods: Iterable[str] | None,
        chat_id: int | None,
        status: int = 0,
        description: str = "",
        retry_after: int | None = None,
        *,
        delay_s: float = 0.0,
    ) -> None:
        if count is None and seconds is None:
            count = 1
        self._faults.append(
            Fault(
                status=status,
                description=description,
                remaining=count,
                until=None if seconds is None else time.monotonic() + seconds,
                methods=None if methods is None else frozenset(m.lower() for m in methods),
                chat_id=chat_id,
                retry_after=retry_after,
                kind=kind,
                delay_s=delay_s,
            )
        )

    def clear_faults(self) -> None:
        self._faults.clear()

    def _take_fault(self, method: str, chat_id: int | None) -> Fault | None:
        """The first injected fault matching this call, spending one of its uses."""
        if not self._faults:
            return None
        now = time.monotonic()
        for fault in self._faults:
            if fault.matches(method, chat_id, now):
                if fault.remaining is not None:
                    fault.remaining -= 1
                self.injected_errors += 1
                self._faults = [f for f in self._faults if _alive(f, now)]
                return fault
        return None

    def enforce_rate_limits(
        self,
        per_chat_per_s: int | None = 1,
        per_group_per_min: int | None = 20,
        global_per_s: int | None = 30,
        *,
        methods: Iterable[str] = ("sendMessage", "editMessageText"),
        slack_s: float = 0.05,
        chat_burst: int = 1,
    ) -> None:
        """Answer 429 when the bot posts faster than Telegram allows, and count it.

        Windows are sliding and measured on arrival; `slack_s` shortens them a little so that
        a sender pacing at exactly the limit is not punished for network jitter. A chat may
        post `chat_burst` messages at once (its window is then that many seconds long, for as
        many posts a second).
        """
        self._limits = RateLimits(
            per_chat_per_s,
            per_group_per_min,
            global_per_s,
            frozenset(m.lower() for m in methods),
            slack_s,
            max(1, chat_burst),
        )
        self._chat_sends.clear()
        self._global_sends.clear()

    def disable_rate_limits(self) -> None:
        self._limits = None

    @property
    def rate_violations(self) -> int:
        return len(self.violations)

    def _check_rate(self, method: str, chat_id: int) -> None:
        """Refuse (429, counted) a post that would break the enforced limits; else book it."""
        limits = self._limits
        if limits is None or method.lower() not in limits.methods:
            return
        now = time.monotonic()
        sends = self._chat_sends.setdefault(chat_id, deque())
        while sends and sends[0] <= now - 60:
            sends.popleft()
        bot = self._global_sends
        while bot and bot[0] <= now - (1 - limits.slack_s):
            bot.popleft()
        burst = limits.chat_burst
        chat_limit = None if limits.per_chat_per_s is None else limits.per_chat_per_s * burst
        checks: list[tuple[str, int | None, float, deque[float]]] = [
            ("per_chat_per_s", chat_limit, float(burst), sends),
            ("global_per_s", limits.global_per_s, 1.0, bot),
        ]
        if chat_id < 0:
            checks.append(("per_group_per_min", limits.per_group_per_min, 60.0, sends))
        for rule, limit, window, times in checks:
            if limit is None or len(times) < limit:
                continue
            # The limit-th newest post: within the window, this post would be one too many.
            at = times[-limit]
            if at > now - (window - limits.slack_s):
                wait = at + window - limits.slack_s - now
                retry_after = max(1, math.ceil(wait))
                self.violations.append(RateViolation(now, method, chat_id, rule, retry_after))
                raise ApiError(
                    429, f"Too Many Requests: retry after {retry_after}", retry_after=retry_after
                )
        sends.append(now)
        self._global_sends.append(now)


def _alive(fault: Fault, now: float) -> bool:
    unspent = fault.remaining is None or fault.remaining > 0
    return unspent and (fault.until is None or now < fault.until)
