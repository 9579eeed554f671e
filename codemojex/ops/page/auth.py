"""Who may use the ops page: the holder of CODEMOJEX_OPS_TOKEN, after the login form.

The token must be strong to start at all (`token_problem`): at least TOKEN_MIN characters and
no placeholder. The comparison is constant-time over the whole token: a prefix, the token with
a suffix or the empty string are all wrong.

Login tries have two budgets (`LoginBudget`, its keyword defaults), and only one of them refuses:

- Each client address (an IPv6 client by its /64; behind a trusted proxy the address it
  forwards, ops/page/proxies.py) has a bucket of tries. A try takes from it before the token
  is even read, so requests sent in parallel cannot all be compared while the first ones wait
  out their delay; an empty bucket is a 429 without a comparison. A right token gives its try
  back.
- The whole page has a bucket too, and it never refuses: it slows wrong tries. While it lasts
  a wrong token is answered after `fail_delay_s`; once a swarm of addresses has emptied it,
  after `slow_delay_s`. A right token is never held, whatever the page's
  bucket holds: the token is compared first (cheap, and each address's bucket already bounds
  how many of its tries are compared), and only a wrong one is made to wait.

Why slow rather than refuse, and rather than keep tries apart for the addresses that logged in
before: a page-wide budget that refuses is a lock anyone can turn from enough addresses, and
the operator is locked out exactly while the page is attacked, which is when it is needed. A
list of addresses that logged in before would not let in the operator who comes from a new one
(a phone, a hotel, a VPN, an address the provider changed), and it would have to be kept
bounded against the same swarm. Slowing wrong answers costs a right token nothing and costs a
swarm time on every connection. What guards the token is its length (32 random characters are
out of reach of guessing at any rate a network allows); the budgets keep the guessing, and the
page's work, down. At most `held_most` wrong answers are held at once (memory
stays bounded); past that a wrong token is answered at once.

A login makes a server-side session (in memory: a restart logs everyone out) whose id is an
HttpOnly, SameSite=Strict cookie: `__Host-cmx_ops`, `Secure`, over https (directly or from a
trusted proxy, ops/page/proxies.py), `cmx_ops` over plain http (loopback). A session ends
after `Sessions`' lifetime (12 h), after its idle time (30 min) without a request (an open page
refreshes itself), or when 64 newer ones push it out; every action must carry the session's CSRF
token. The operator's name, given at login, is what the audit log records of each action.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

from aiohttp import web

from codemojex.secrecy import weakness

COOKIE: Final = "cmx_ops"
SECURE_COOKIE: Final = "__Host-cmx_ops"  # Secure, path /, no Domain: this host's alone
NAME_MAX: Final = 64  # the operator's name, as the audit log records it
# CODEMOJEX_OPS_TOKEN's shortest (as the webhook's secret).
TOKEN_MIN: Final = 32
# Paths anyone may fetch: the login form, its assets.
OPEN_PATHS: Final = ("/login", "/static/")
TOKEN_NAME: Final = "CODEMOJEX_OPS_TOKEN"


def token_problem(token: str | None) -> str | None:
    """Why the page will not start with this token (None: it will)."""
    if not token:
        return f"set {TOKEN_NAME}: the ops page lets whoever has it steer"
    return weakness(token, TOKEN_NAME, TOKEN_MIN)


@dataclass(slots=True)
class Session:
    operator: str
    csrf: str
    expires: float  # time.monotonic() it ends at the latest
    seen: float  # time.monotonic() of its last request
    https: bool  # opened over https: valid over https only (its cookie is Secure)


class Sessions:
    def __init__(
        self,
        token: str,
        lifetime_s: float = 12 * 3600,
        *,
        idle_s: float = 30 * 60,
        most: int = 64,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not token:
            raise ValueError("the ops page needs a token")
        self._token = token.encode()
        self._lifetime_s = lifetime_s
        self._idle_s = idle_s
        self._most = most
        self._clock = clock
        self._by_id: OrderedDict[str, Session] = OrderedDict()  # least recently used first

    def token_ok(self, given: str) -> bool:
        return hmac.compare_digest(given.encode("utf-8", "replace"), self._token)

    def open(self, operator: str, *, https: bool = False) -> tuple[str, Session]:
        now = self._clock()
        sid = secrets.token_urlsafe(32)
        session = Session(operator, secrets.token_urlsafe(32), now + self._lifetime_s, now, https)
        self._by_id[sid] = session
        while len(self._by_id) > self._most:
            self._by_id.popitem(last=False)
        return sid, session

    def get(self, sid: str, *, https: bool = False) -> Session | None:
        session = self._by_id.get(sid)
        if session is None or session.https != https:
            return None
        now = self._clock()
        if session.expires <= now or session.seen + self._idle_s <= now:
            del self._by_id[sid]
            return None
        session.seen = now
        self._by_id.move_to_end(sid)
        return session

    def close(self, sid: str) -> None:
        self._by_id.pop(sid, None)

    def __len__(self) -> int:
        return len(self._by_id)

    @property
    def lifetime_s(self) -> float:
        return self._lifetime_s


@dataclass(slots=True)
class _Bucket:
    tokens: float
    at: float


class _Buckets:
    """Token buckets: `burst` tries, one more every `refill_s`."""

    def __init__(self, burst: int, refill_s: float, most: int, clock: Callable[[], float]):
        self._burst = burst
        self._refill_s = refill_s
        self._most = most
        self._clock = clock
        self._by_key: OrderedDict[str, _Bucket] = OrderedDict()

    def _bucket(self, key: str) -> _Bucket:
        now = self._clock()
        bucket = self._by_key.get(key)
        if bucket is None:
            bucket = self._by_key[key] = _Bucket(float(self._burst), now)
            while len(self._by_key) > self._most:
                self._by_key.popitem(last=False)  # forgotten: a full bucket when seen again
        else:
            self._by_key.move_to_end(key)
            bucket.tokens = min(self._burst, bucket.tokens + (now - bucket.at) / self._refill_s)
            bucket.at = now
        return bucket

    def has(self, key: str) -> bool:
        return self._bucket(key).tokens >= 1

    def take(self, key: str) -> None:
        self._bucket(key).tokens -= 1

    def give(self, key: str) -> None:
        bucket = self._bucket(key)
        bucket.tokens = min(self._burst, bucket.tokens + 1)


class LoginBudget:
    """Login tries: per client address (refuses), for the whole page (slows wrong tries).

    An address has `burst_addr` tries, then one per `refill_addr_s`, past them 429 (the last
    `addresses` addresses are remembered, least recently used out). The page answers `burst`
    wrong tokens after `fail_delay_s`, then one per `refill_s`, past them after
    `slow_delay_s`; at most `held_most` wrong answers wait at once (each an open request).
    `clock` and `sleep` are the monotonic clock and the wait (tests pass their own)."""

    def __init__(
        self,
        *,
        burst_addr: int = 10,
        refill_addr_s: float = 6.0,
        burst: int = 40,
        refill_s: float = 3.0,
        addresses: int = 10_000,
        fail_delay_s: float = 0.5,
        slow_delay_s: float = 5.0,
        held_most: int = 1_000,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._addr = _Buckets(burst_addr, refill_addr_s, addresses, clock)
        self._all = _Buckets(burst, refill_s, 1, clock)
        self.burst_addr, self.refill_addr_s, self.burst = burst_addr, refill_addr_s, burst
        self.fail_delay_s, self.slow_delay_s = fail_delay_s, slow_delay_s
        self.held_most = held_most
        self._sleep = sleep
        self.held = 0  # wrong answers waiting out their delay now

    @staticmethod
    def client_key(address: str) -> str:
        """An IPv6 client by its /64 (one host usually has a whole /64 to pick from)."""
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return address[:64]
        if isinstance(ip, ipaddress.IPv6Address):
            if ip.ipv4_mapped is not None:
                return str(ip.ipv4_mapped)
            return str(ipaddress.IPv6Network((ip, 64), strict=False))
        return str(ip)

    def take(self, address: str) -> bool:
        """Take a try for `address`; False (nothing taken: refuse it) when it has none left.
        The page's budget is not asked: it never refuses."""
        key = self.client_key(address)
        if not self._addr.has(key):
            return False
        self._addr.take(key)
        return True

    def give_back(self, address: str) -> None:
        """The try was a right token: it costs its address nothing."""
        self._addr.give(self.client_key(address))

    async def hold_wrong(self) -> None:
        """Wait before answering a wrong token: the short delay while the page's budget
        lasts, the long one past it; no wait when `held_most` answers wait
        already."""
        if self.held >= self.held_most:
            return
        if self._all.has(""):
            self._all.take("")
            delay = self.fail_delay_s
        else:
            delay = self.slow_delay_s
        self.held += 1
        try:
            await self._sleep(delay)
        finally:
            self.held -= 1


def clean_name(raw: str) -> str:
    """The operator's name as the audit log will show it: printable, trimmed, bounded."""
    return "".join(ch for ch in raw if ch.isprintable()).strip()[:NAME_MAX]


def csrf_ok(session: Session, given: str) -> bool:
    return hmac.compare_digest(given.encode("utf-8", "replace"), session.csrf.encode())


def cookie_name(https: bool) -> str:
    return SECURE_COOKIE if https else COOKIE


def set_cookie(response: web.StreamResponse, https: bool, sid: str, max_age: float) -> None:
    response.set_cookie(
        cookie_name(https),
        sid,
        max_age=int(max_age),
        httponly=True,
        samesite="Strict",
        secure=https,  # never sent in clear; with the __Host- prefix the browser insists
        path="/",
    )
