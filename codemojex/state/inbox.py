"""The bot's inbox in Redis: updates confirmed to Telegram before they were finished, and the
dead letters. Why it exists is bot/door.py's and bot/clock.py's; this is only how it is kept.

A parked update (`cmx:{q}:inbox:parked`, a hash: update id -> record) is one the bot took,
could not finish within its deadline (a stuck lock, an outage, a slow dependency) and keeps
here so that Telegram may forget it: the record is the update's JSON as Telegram sent it and
the tries its handler had so far. Each is filed under its order key (`inbox:key:<key>`, by
update id: bot/order.py) and held by the process that parked it (`inbox:where`,
`inbox:held:<holder>`). A process is one holder (`Inbox.holder`, random per process) with one
lease for everything it holds (`inbox:holders`), renewed by its door's clock: a process that
died leaves a lease that runs out, and another process takes its updates over (`take`), whole
keys in update-id order. A process never takes its own updates over, however long Redis was
out. A poller stamps its holder with its fence (`fence`, `inbox:fences`): the poller that took
the lease after it takes every update a lower fence held at once, before it fetches anything.

One order per key across processes: a webhook process checks each update it is handed
against the parked ones (`enter`, one call per event-loop turn of requests): one whose key
has parked updates is parked behind them at once, unheld (`-`), and whoever settles the key's
updates before it is handed it next (`settle`). The handlers are safe on an update handled
twice (a guess's job id is derived from its message, a command is idempotent on its
message), so a lease that ran out under a process still alive costs an update handled twice,
never a loss.

A dead letter (`cmx:{q}:inbox:dead`, a list, newest first, at most `dead_max`, gone
`dead_ttl_s` after the last) is an update that cannot be handled: Telegram's JSON that
python-telegram-bot cannot read, or one whose handler failed with a bug on every try. It is
confirmed all the same (it would hold its chat's queue at Telegram for a day), and kept for
the operator: when, which chat, user and kind, the error's type, and the update itself.

One poller per bot (`PollerLease`, `cmx:{q}:poller:<bot id>`): two processes polling one
token take each other's updates away (Telegram ends the older long poll), and during a
rolling deploy the new one would take the old one's parked updates as a dead process's. The
lease is fenced: each new holder gets a higher number, which stamps what its door parks.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from codemojex.state.keys import Keys, check_order_key
from codemojex.state.scripts import NAMES, register
from codemojex.values.redistypes import AnyRedis

# A holder's lease over its parked updates, and the poller's: renewed every third; a process
# that died is taken over this long after (a poller's at once by the next poller's fence).
LEASE_MS: Final = 15_000
# The poller's fence lives this long after its last holder took the lease (a counter that
# only orders holders: a month without any poller may start it again).
FENCE_TTL_S: Final = 30 * 24 * 3600
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
    """The parked updates and dead letters of one queue's bot, as seen by one holder (module
    docstring)."""

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
        self.holder = secrets.token_hex(8)
        self.fence = 0  # the poller's fence while this process polls (0: it does not)
        self._scripts = {name: register(redis, name) for name in _SCRIPTS}
        k = self._keys
        self._both = [k.prefix, k.inbox_parked, k.inbox_where]
        self._all = [*self._both, k.inbox_holders, k.inbox_fences]

    async def park(self, records: Sequence[tuple[int, str, str]]) -> None:
        """Keep these (update id, order key, `record(...)`) held by the caller, in one call."""
        if records:
            await self._scripts["inbox_park"](
                keys=self._all[:4], args=[self.holder, self.lease_ms, *_flat(records)]
            )

    async def enter(self, records: Sequence[tuple[int, str, str]]) -> list[int]:
        """Check these new updates against what is parked, in one call (inbox_enter.lua's
        answer for each: 0 run it, 1 parked behind another process, 2 parked behind the
        caller's own, 3 a copy of one parked already)."""
        if not records:
            return []
        answer = await self._scripts["inbox_enter"](
            keys=self._both, args=[self.holder, *_flat(records)]
        )
        return [int(a) for a in answer]

    async def settle(self, update_ids: Sequence[int], room: int) -> list[Parked]:
        """These are finished: forget them, in one call; what waits behind them in their keys
        is now the caller's (at most `room`), each key's oldest first."""
        if not update_ids:
            return []
        flat = await self._scripts["inbox_settle"](
            keys=self._all,
            args=[self.holder, max(0, room), self.lease_ms, *(int(u) for u in update_ids)],
        )
        return _parked(flat)

    async def renew(self, *, lease_ms: int | None = None) -> int:
        """The caller is alive: its lease starts again (`lease_ms=0`: it stops, and another
        process may take over what it holds now). How many parked updates it holds."""
        lease = self.lease_ms if lease_ms is None else lease_ms
        held = await self._scripts["inbox_renew"](
            keys=[self._keys.prefix, self._keys.inbox_holders], args=[self.holder, lease]
        )
        return int(held)

    async def take(self, most: int) -> list[Parked]:
        """Parked updates of holders that are gone (or fenced out by `fence`), at most `most`,
        now the caller's: whole keys, each key's oldest first."""
        if most < 1:
            return []
        flat = await self._scripts["inbox_take"](
            keys=self._all, args=[self.holder, self.lease_ms, most, self.fence]
        )
        return _parked(flat)

    async def legacy(self, most: int) -> list[Parked]:
        """Parked updates a bot of the version before kept under a lease of their own
        (`cmx:{q}:inbox:lease`), once it ran out: the caller files them under their keys
        (`park`) and handles them."""
        if most < 1:
            return []
        flat = await self._scripts["inbox_legacy"](
            keys=[self._keys.inbox_parked, self._keys.inbox_legacy_lease], args=[most]
        )
        return _parked(flat)

    async def dead(self, update_id: int, letter: dict[str, Any], update: Any) -> None:
        """Keep `update_id` in the dead letters (`letter`: what `DeadLetter` reads; `update`:
        Telegram's JSON, or the unreadable body as text); a parked one is then settled."""
        body = dict(letter, id=int(update_id), at=time.time(), update=update)
        await self._scripts["inbox_dead"](
            keys=[self._keys.inbox_dead], args=[json.dumps(body), self.dead_max, self.dead_ttl_s]
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


_SCRIPTS: Final = tuple(name for name in NAMES if name.startswith("inbox_"))


def _flat(records: Sequence[tuple[int, str, str]]) -> list[int | str]:
    args: list[int | str] = []
    for update_id, key, rec in records:
        args += [int(update_id), check_order_key(key), rec]
    return args


def _parked(flat: list[Any]) -> list[Parked]:
    """The script's {update id, record, ...} read."""
    taken = []
    for update_id, raw in zip(flat[::2], flat[1::2], strict=True):
        data = json.loads(raw)
        taken.append(Parked(int(update_id), data["u"], int(data["t"])))
    return taken


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
