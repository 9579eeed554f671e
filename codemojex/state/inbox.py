"""The bot's inbox in Redis: updates confirmed to Telegram before they were finished, and the
dead letters. Why it exists is bot/door.py's; this is only how it is kept.

A parked update (`cmx:{q}:inbox:parked`, a hash: update id -> record) is one the bot took,
could not finish within its deadline (a stuck lock, an outage, a slow dependency) and keeps
here so that Telegram may forget it: the record is the update's JSON as Telegram sent it and
the tries its handler had so far. Each is leased to the process that parked it
(`cmx:{q}:inbox:lease`, a zset: update id -> when the lease ends, Redis's clock, ms), which
renews the leases of what it still works on; a process that died leaves leases that run
out, and another process takes those updates over (`take`) and handles them. The handlers
are safe on an update handled twice (a guess's job id is derived from its message, a command
is idempotent on its message), so a lease that ran out under a process still alive costs an
update handled twice, never a loss.

A dead letter (`cmx:{q}:inbox:dead`, a list, newest first, at most `dead_max`, gone
`dead_ttl_s` after the last) is an update that cannot be handled: Telegram's JSON that
python-telegram-bot cannot read, or one whose handler failed with a bug on every try. It is
confirmed all the same (it would hold its chat's queue at Telegram for a day), and kept for
the operator: when, which chat, user and kind, the error's type, and the update itself.

One poller per bot (`PollerLease`, `cmx:{q}:poller:<bot id>`): two processes polling one
token take each other's updates away (Telegram ends the older long poll), and during a
rolling deploy the new one would take the old one's parked updates as a dead process's. The
lease is fenced: each new holder gets a higher number, which the poller logs and reports.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from codemojex.state.keys import Keys
from codemojex.state.scripts import register
from codemojex.values.redistypes import AnyRedis

# A parked update's lease, and the poller's: renewed every third; a process that died is
# taken over this long after. The poller's is no shorter than a parked update's, so that a new
# poller finds a dead one's parked updates free.
LEASE_MS: Final = 15_000
# The poller's fence lives this long after its last holder took the lease (a counter that
# only orders holders: a month without any poller may start it again).
FENCE_TTL_S: Final = 30 * 24 * 3600
# Parked updates taken over at most at once.
TAKE_MAX: Final = 500
# The dead letters kept for the operator (the newest), and how long after the last.
DEAD_MAX: Final = 1_000
DEAD_TTL_S: Final = 14 * 24 * 3600


@dataclass(frozen=True, slots=True)
class Parked:
    """An update taken over from the inbox: its id, Telegram's JSON, the tries so far."""

    update_id: int
    update: dict[str, Any]
    tries: int


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """What the operator reads of an update that could not be handled (never its text)."""

    update_id: int
    at: float  # unix time it was given up
    kind: str  # message, callback_query, ... ("unreadable" when it could not be read)
    chat_id: int | None
    user_id: int | None
    error: str  # the exception's type
    tries: int

    @classmethod
    def of(cls, raw: bytes | str) -> DeadLetter:
        data = json.loads(raw)
        return cls(
            update_id=int(data["id"]),
            at=float(data["at"]),
            kind=str(data["kind"]),
            chat_id=data.get("chat"),
            user_id=data.get("user"),
            error=str(data["error"]),
            tries=int(data["tries"]),
        )


def record(update: dict[str, Any] | bytes, tries: int) -> str:
    """The parked record of an update: its JSON as Telegram sent it (a dict, or the webhook's
    body unread), and its tries."""
    body = update.decode() if isinstance(update, bytes) else json.dumps(update)
    return f'{{"t":{int(tries):d},"u":{body}}}'


class Inbox:
    """The parked updates and dead letters of one queue's bot (module docstring)."""

    def __init__(
        self,
        redis: AnyRedis,
        queue: str,
        *,
        lease_ms: int = LEASE_MS,
        dead_max: int = DEAD_MAX,
        dead_ttl_s: int = DEAD_TTL_S,
    ) -> None:
        if lease_ms < 1000 or dead_max < 1 or dead_ttl_s < 1:
            raise ValueError("a lease lasts a second at least; one dead letter is kept at least")
        self._redis = redis
        self._keys = Keys(queue)
        self.lease_ms = lease_ms
        self.dead_max = dead_max
        self.dead_ttl_s = dead_ttl_s
        self._park = register(redis, "inbox_park")
        self._settle = register(redis, "inbox_settle")
        self._renew = register(redis, "inbox_renew")
        self._take = register(redis, "inbox_take")
        self._dead = register(redis, "inbox_dead")

    async def park(self, records: Sequence[tuple[int, str]]) -> None:
        """Keep these (update id, `record(...)`) leased to the caller, in one call."""
        if not records:
            return
        args: list[int | str] = [self.lease_ms]
        for update_id, rec in records:
            args += [int(update_id), rec]
        await self._park(keys=[self._keys.inbox_parked, self._keys.inbox_lease], args=args)

    async def settle(self, update_ids: Sequence[int]) -> None:
        """These are finished: forget them, in one call."""
        if update_ids:
            await self._settle(
                keys=[self._keys.inbox_parked, self._keys.inbox_lease],
                args=[int(u) for u in update_ids],
            )

    async def renew(self, update_ids: Sequence[int], *, lease_ms: int | None = None) -> int:
        """The caller still works on these: their leases start again (`lease_ms=0`: they end
        now, for another process to take over). How many were renewed (fewer: some were
        taken over after their lease ran out)."""
        if not update_ids:
            return 0
        lease = self.lease_ms if lease_ms is None else lease_ms
        renewed = await self._renew(
            keys=[self._keys.inbox_lease], args=[lease, *(int(u) for u in update_ids)]
        )
        return int(renewed)

    async def take(self, most: int = TAKE_MAX) -> list[Parked]:
        """Parked updates whose lease ran out, leased anew to the caller, oldest first."""
        flat = await self._take(
            keys=[self._keys.inbox_parked, self._keys.inbox_lease], args=[self.lease_ms, most]
        )
        taken = []
        for update_id, raw in zip(flat[::2], flat[1::2], strict=True):
            data = json.loads(raw)
            taken.append(Parked(int(update_id), data["u"], int(data["t"])))
        return sorted(taken, key=lambda p: p.update_id)

    async def dead(self, update_id: int, letter: dict[str, Any], update: Any) -> None:
        """Give `update_id` up: out of the parked updates, into the dead letters (`letter`:
        what `DeadLetter` reads; `update`: Telegram's JSON, or the unreadable body as text)."""
        body = dict(letter, id=int(update_id), at=time.time(), update=update)
        await self._dead(
            keys=[self._keys.inbox_parked, self._keys.inbox_lease, self._keys.inbox_dead],
            args=[int(update_id), json.dumps(body), self.dead_max, self.dead_ttl_s],
        )

    async def dead_letters(self, most: int = DEAD_MAX) -> list[DeadLetter]:
        """The dead letters, newest first (what the ops page lists)."""
        raw = await self._redis.lrange(self._keys.inbox_dead, 0, most - 1)
        return [DeadLetter.of(item) for item in raw]

    async def counts(self) -> tuple[int, int]:
        """(updates parked now, dead letters kept)."""
        parked = await self._redis.hlen(self._keys.inbox_parked)
        dead = await self._redis.llen(self._keys.inbox_dead)
        return int(parked), int(dead)


class PollerLease:
    """The right to poll Telegram for one bot, held by one process at a time (module
    docstring). `hold()` takes or renews it: the fence number while held, 0 while another
    process holds it."""

    def __init__(
        self, redis: AnyRedis, queue: str, bot_id: int, *, lease_ms: int = LEASE_MS
    ) -> None:
        keys = Keys(queue)
        self._keys = [keys.poller(bot_id), keys.poller_fence(bot_id)]
        self.lease_ms = lease_ms
        self.token = secrets.token_hex(8)
        self._hold = register(redis, "poller_hold")
        self._release = register(redis, "poller_release")

    async def hold(self) -> int:
        held = await self._hold(keys=self._keys, args=[self.token, self.lease_ms, FENCE_TTL_S])
        return int(held)

    async def release(self) -> None:
        await self._release(keys=self._keys[:1], args=[self.token])
