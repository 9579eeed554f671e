"""The charts' numbers: the ops process samples the queue, the outbox and every process's
published counters every `every_s` (5 s) into a ring buffer of `keep_s` (15 minutes).

Why in memory: the history is for a glance at the last minutes (Prometheus and the Grafana
dashboard in deploy/ keep the long one), it costs the deployment nothing between page
loads, and a restart of the page only empties the charts. Rates and wait percentiles come
from the difference between two samples of the processes' counters (ops/fleet.py), per
process (a restarted process is a new one), summed over the fleet.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from dataclasses import asdict, dataclass, replace
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from codemojex.db.reading import reading
from codemojex.db.store.ops import outbox_backlog
from codemojex.lanes import Lanes
from codemojex.lanes.views import QueueStats
from codemojex.ops.fleet import Proc, read_fleet
from codemojex.posting.pacer import BotPace, read_bot_pace
from codemojex.values.redistypes import AnyRedis

log = logging.getLogger(__name__)

SCORED = "codemojex_guesses_scored_total{}"
RETRY_AFTER = "codemojex_telegram_retry_after_total{}"
WAIT_BUCKET = "codemojex_guess_wait_seconds_bucket"


@dataclass(frozen=True, slots=True)
class Point:
    t: float  # unix seconds
    pending: int
    active: int
    delayed: int
    dead: int
    outbox: int | None
    scored_per_s: float | None  # None: no earlier sample of any process to compare with
    retry_after: float | None  # RetryAfters since the previous sample
    wait_p50: float | None  # seconds, over the guesses scored since the previous sample
    wait_p90: float | None
    wait_p99: float | None
    # The bot's learned rate (posts a second; None: not learned yet) and Telegram's 429s
    # since the previous sample by what explains them (posting/pacer.py).
    pace_rate: float | None = None
    refused_chat: float | None = None
    refused_group: float | None = None
    refused_bot: float | None = None


def quantile(q: float, buckets: list[tuple[float, float]]) -> float | None:
    """Prometheus's histogram_quantile over cumulative (upper bound, count) buckets: linear
    within the bucket holding the q-th observation; None without observations."""
    buckets = sorted(buckets)
    if not buckets or buckets[-1][1] <= 0:
        return None
    rank = q * buckets[-1][1]
    lower, below = 0.0, 0.0
    for upper, count in buckets:
        if count >= rank:
            if upper == float("inf"):
                return lower
            share = (rank - below) / (count - below) if count > below else 0.0
            return lower + (upper - lower) * share
        lower, below = upper, count
    return lower


def _le(series: str) -> float:
    return float(series.split('le="', 1)[1].split('"', 1)[0])


class History:
    def __init__(
        self,
        lanes: Lanes,
        sessionmaker: async_sessionmaker[AsyncSession],
        redis: AnyRedis,
        queue: str,
        *,
        every_s: float = 5.0,
        keep_s: float = 15 * 60,
        bot: int = 0,
    ) -> None:
        self.lanes = lanes
        self.sessionmaker = sessionmaker
        self.redis = redis
        self.queue = queue
        self.every_s = every_s
        self.points: deque[Point] = deque(maxlen=max(2, int(keep_s / every_s)))
        self.stats: QueueStats | None = None
        self.fleet: list[Proc] = []
        self._seen: dict[str, dict[str, float]] = {}  # proc id -> its values last sample
        self.bot = bot
        self.pace: BotPace | None = None
        self._at = 0.0

    def _deltas(self, fleet: list[Proc]) -> dict[str, float] | None:
        """Summed growth of each series since the last sample, over the processes seen both
        times; None when none was."""
        out: dict[str, float] = {}
        common = False
        for proc in fleet:
            before = self._seen.get(proc.id)
            if before is None:
                continue
            common = True
            for name, value in proc.values.items():
                out[name] = out.get(name, 0.0) + max(0.0, value - before.get(name, 0.0))
        self._seen = {proc.id: proc.values for proc in fleet}
        return out if common else None

    async def sample(self) -> Point:
        stats = await self.lanes.stats()
        async with reading(self.sessionmaker) as session:
            outbox = await outbox_backlog(session)
        fleet = await read_fleet(self.redis, self.queue)
        pace, before = await read_bot_pace(self.redis, self.queue, self.bot), self.pace
        self.pace = pace
        now = time.time()
        deltas = self._deltas(fleet)
        dt = now - self._at
        self._at, self.stats, self.fleet = now, stats, fleet
        waits: list[tuple[float, float]] = []
        if deltas is not None:
            waits = [(_le(k), v) for k, v in deltas.items() if k.startswith(WAIT_BUCKET)]
        point = Point(
            now,
            stats.pending,
            stats.active,
            stats.delayed,
            stats.dead,
            outbox,
            None if deltas is None else round(deltas.get(SCORED, 0.0) / dt, 2),
            None if deltas is None else deltas.get(RETRY_AFTER, 0.0),
            *(quantile(q, waits) for q in (0.5, 0.9, 0.99)),
        )

        def since(cause: str) -> float | None:
            return None if before is None else float(pace.refused[cause] - before.refused[cause])

        point = replace(
            point,
            pace_rate=pace.rate,
            refused_chat=since("chat"),
            refused_group=since("group"),
            refused_bot=since("bot"),
        )
        self.points.append(point)
        return point

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await self.sample()
            except Exception as exc:  # the page shows the last numbers; the next try may work
                log.warning("ops sample failed (%s)", type(exc).__name__)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.every_s)

    def series(self) -> dict[str, list[Any]]:
        """The points as columns (uPlot's data layout)."""
        rows = [asdict(p) for p in self.points]
        names = Point.__dataclass_fields__
        return {name: [row[name] for row in rows] for name in names}
