"""Collectors: the components' stats objects and the queue's books as Prometheus series.

They run at scrape time and only read memory: `Shared.refresh()` (awaited by the /metrics
handler and the fleet publisher before they collect) fetches the queue's numbers with one
`stats` script call and the outbox backlog with one count, at most once per
CACHE_S however often the process is scraped. Per-room series are for the deepest
`top_rooms` rooms only, so a deployment with 100,000 rooms exports top_rooms x 2 of them.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Annotated, Final, Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from pydantic import Field
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from codemojex.db.reading import reading
from codemojex.db.store.ops import outbox_backlog
from codemojex.lanes import Lanes
from codemojex.lanes.views import QueueStats
from codemojex.metrics import EVENTS
from codemojex.outages import OUTAGES, Component
from codemojex.posting.pacer import CAUSES, BotPace, read_bot_pace
from codemojex.values.bounds import within
from codemojex.values.redistypes import AnyRedis

COMPONENTS: tuple[Component, ...] = ("redis", "postgres", "telegram")
# The bot's outcomes (bot/guesses.py) as codemojex_guesses_total's; "ignored" is chatter.
BOT_OUTCOMES = {
    "enqueued": "accepted",
    "invalid": "refused_invalid",
    "flood": "refused_full",
    "banned": "refused_banned",
    "no_round": "no_round",
}
POST_KINDS = ("result", "folded", "reply", "round", "keys_off")
# Per-room series only for the rooms with the deepest queues (CODEMOJEX_METRICS_TOP_ROOMS):
# the series' cardinality stays bounded however many rooms there are.
TOP_ROOMS: Final = 20
TopRooms = Annotated[int, Field(ge=0, le=1000)]
# The queue's numbers are read at most once per CACHE_S, however often it is scraped; a read
# (the queue's, the fleet's) waits READ_TIMEOUT_S at most.
CACHE_S: Final = 1.0
READ_TIMEOUT_S: Final = 2.0


class Shared:
    """The numbers every process exports alike: the queue's books, the outbox backlog and the
    bot's learned pace (`bot`: its id; read from Redis, the same in every process). A failed
    read leaves its series out of the scrape (an absent series, not a wrong one)."""

    def __init__(
        self,
        lanes: Lanes,
        sessionmaker: async_sessionmaker[AsyncSession],
        top_rooms: int = TOP_ROOMS,
        ttl_s: float = CACHE_S,
        *,
        redis: AnyRedis | None = None,
        bot: int = 0,
    ) -> None:
        self.lanes = lanes
        self.sessionmaker = sessionmaker
        self.top_rooms = within(top_rooms, TopRooms, "top_rooms")
        self.ttl_s = ttl_s
        self.redis = redis
        self.bot = bot
        self.stats: QueueStats | None = None
        self.outbox_pending: int | None = None
        self.pace: BotPace | None = None
        self._at = float("-inf")
        self._lock = asyncio.Lock()

    async def refresh(self) -> None:
        async with self._lock:  # concurrent scrapes share one read
            if time.monotonic() - self._at < self.ttl_s:
                return
            self._at = time.monotonic()
            stats, backlog, pace = await asyncio.gather(
                asyncio.wait_for(self.lanes.stats(self.top_rooms), READ_TIMEOUT_S),
                asyncio.wait_for(self._backlog(), READ_TIMEOUT_S),
                asyncio.wait_for(self._pace(), READ_TIMEOUT_S),
                return_exceptions=True,
            )
            self.stats = stats if isinstance(stats, QueueStats) else None
            self.outbox_pending = backlog if isinstance(backlog, int) else None
            self.pace = pace if isinstance(pace, BotPace) else None

    async def _backlog(self) -> int:
        async with reading(self.sessionmaker) as session:
            return await outbox_backlog(session)

    async def _pace(self) -> BotPace | None:
        if self.redis is None:
            return None
        return await read_bot_pace(self.redis, self.lanes.queue, self.bot)


def _labelled(name: str, doc: str, label: str, values: dict[str, float], *, gauge: bool) -> Metric:
    family = (GaugeMetricFamily if gauge else CounterMetricFamily)(name, doc, labels=[label])
    for key, value in values.items():
        family.add_metric([key], value)
    return family


class SharedCollector(Collector):
    def __init__(self, shared: Shared) -> None:
        self.shared = shared

    def collect(self) -> Iterator[Metric]:
        yield _labelled(
            "codemojex_outages",
            "Outages seen by this process (one per episode, however many retries).",
            "component",
            {c: OUTAGES.started[c] for c in COMPONENTS},
            gauge=False,
        )
        yield _labelled(
            "codemojex_retries",
            "Failed attempts retried through an outage, by retry policy (limits.RETRIES).",
            "policy",
            {k: float(v) for k, v in OUTAGES.retried.items()},
            gauge=False,
        )
        yield _labelled(
            "codemojex_swallowed",
            "Failures a component went on without (best effort), by where they happened.",
            "where",
            {k: float(v) for k, v in OUTAGES.swallowed.items()},
            gauge=False,
        )
        yield _labelled(
            "codemojex_outage",
            "1 while this process waits out an outage of the component.",
            "component",
            {c: float(OUTAGES.is_open(c)) for c in COMPONENTS},
            gauge=True,
        )
        if self.shared.outbox_pending is not None:
            yield GaugeMetricFamily(
                "codemojex_outbox_pending",
                "Outbox rows (results, announcements) not posted yet.",
                value=self.shared.outbox_pending,
            )
        yield from _pace_metrics(self.shared.pace)
        s = self.shared.stats
        if s is None:
            return
        yield _labelled(
            "codemojex_queue_jobs",
            "Guesses in the lanes by state.",
            "state",
            {"pending": s.pending, "active": s.active, "delayed": s.delayed, "dead": s.dead},
            gauge=True,
        )
        yield GaugeMetricFamily(
            "codemojex_queue_oldest_pending_age_seconds",
            "How long the oldest pending guess has waited (0 when none waits).",
            value=s.oldest_age_s,
        )
        yield GaugeMetricFamily(
            "codemojex_queue_paused", "1 while the whole queue is paused.", value=s.queue_paused
        )
        yield _labelled(
            "codemojex_rooms",
            "Rooms: serviceable (guesses waiting, can be served now), at_ceiling (guesses "
            "waiting, held at their ceiling), paused (paused rooms, with guesses or not).",
            "state",
            {"serviceable": s.serviceable, "at_ceiling": s.at_ceiling, "paused": s.paused},
            gauge=True,
        )
        pending = GaugeMetricFamily(
            "codemojex_room_pending_jobs",
            "Pending guesses of the rooms with the deepest queues (the top N only).",
            labels=["room"],
        )
        in_flight = GaugeMetricFamily(
            "codemojex_room_in_flight_jobs",
            "Guesses in flight of the rooms with the deepest queues (the top N only).",
            labels=["room"],
        )
        for room, depth, active in s.deepest:
            pending.add_metric([room], depth)
            in_flight.add_metric([room], active)
        yield pending
        yield in_flight


def _pace_metrics(pace: BotPace | None) -> Iterator[Metric]:
    """The bot's learned pace (posting/pacer.py), the same from every process."""
    if pace is None:
        return
    if pace.rate is not None:
        yield GaugeMetricFamily(
            "codemojex_pace_bot_rate",
            "The bot's posting rate learned from Telegram's 429s (posts a second, all "
            "processes together).",
            value=pace.rate,
        )
    yield _labelled(
        "codemojex_pace_refused",
        "Telegram's 429s by what explains them: the chat's own pace, its group's, or the "
        "bot's as a whole (a bot-wide 429 pauses every post and cuts the learned rate); all "
        "processes together.",
        "cause",
        {cause: float(pace.refused[cause]) for cause in CAUSES},
        gauge=False,
    )
    yield CounterMetricFamily(
        "codemojex_pace_cuts",
        "Cuts of the bot's learned rate (all processes together).",
        value=pace.cuts,
    )


class _ScoreStats(Protocol):
    scored: int
    duplicates: int
    won: int


class _SenderStats(Protocol):
    retry_after: int

    def as_dict(self) -> dict[str, int]: ...


class _WorkerStats(Protocol):
    """What the collector reads of worker.service.WorkerStats (ops/ sits below the worker:
    the bot imports it too, and the bot never imports the worker)."""

    @property
    def score(self) -> _ScoreStats: ...
    @property
    def sender(self) -> _SenderStats: ...
    @property
    def rounds_expired(self) -> int: ...
    def as_dict(self) -> dict[str, int]: ...


class WorkerCollector(Collector):
    """The worker's counters (ScoreStats, SenderStats, PoolStats and the round timer's)."""

    def __init__(self, stats: _WorkerStats) -> None:
        self.stats = stats

    def collect(self) -> Iterator[Metric]:
        score, sender = self.stats.score, self.stats.sender
        yield CounterMetricFamily(
            "codemojex_guesses_scored", "Guesses recorded with a score.", value=score.scored
        )
        yield _labelled(
            "codemojex_guesses",
            "Guesses by outcome: a worker counts duplicates (a guess delivered again after "
            "it was recorded), the bot the others.",
            "outcome",
            {"duplicate": score.duplicates},
            gauge=False,
        )
        yield _labelled(
            "codemojex_rounds",
            "Rounds that ended, by how (the bot counts /endround).",
            "end",
            {"won": score.won, "expired": self.stats.rounds_expired},
            gauge=False,
        )
        yield from _posting_metrics(sender)
        yield _labelled(
            "codemojex_worker_events",
            "Everything else the worker counts (consumer pool, score worker, sender).",
            "event",
            dict(self.stats.as_dict()),
            gauge=False,
        )


def _posting_metrics(sender: _SenderStats) -> Iterator[Metric]:
    """What a process's outbox sender posted (the worker's, or a `codemojex sender`)."""
    yield _labelled(
        "codemojex_posts",
        "Messages the outbox sender posted, by kind (folded: several results in one; "
        "keys_off: a round's keyboard removed).",
        "kind",
        {kind: EVENTS.posts[kind] for kind in POST_KINDS},
        gauge=False,
    )
    yield CounterMetricFamily(
        "codemojex_telegram_retry_after",
        "RetryAfter (429) answers from Telegram, honoured.",
        value=sender.retry_after,
    )


class SenderCollector(Collector):
    """A `codemojex sender` process's counters (SenderStats)."""

    def __init__(self, stats: _SenderStats) -> None:
        self.stats = stats

    def collect(self) -> Iterator[Metric]:
        yield from _posting_metrics(self.stats)
        yield _labelled(
            "codemojex_sender_events",
            "Everything the sender counts (SenderStats).",
            "event",
            {k: float(v) for k, v in self.stats.as_dict().items()},
            gauge=False,
        )


# What became of the updates the bot took (bot/door.py `Door.counts`).
DOOR_SETTLED = ("done", "parked", "dead", "shed", "given_back")
DOOR_EVENTS = ("taken_over", "unreadable", "failed_tries", "outage_tries")


class BotCollector(Collector):
    """The bot's counters: what became of the guesses it was sent and of every update it
    took, the rounds ended; and its gauges (`gauges()`: held, standby, id_resets)."""

    def __init__(
        self,
        outcomes: Counter[str],
        door: Counter[str] | None = None,
        gauges: Callable[[], dict[str, float]] | None = None,
    ) -> None:
        self.outcomes = outcomes
        self.door = door if door is not None else Counter()
        self.gauges = gauges

    def collect(self) -> Iterator[Metric]:
        yield _labelled(
            "codemojex_bot_updates",
            "Updates the bot took, by how each was settled (done; parked in Redis past its "
            "deadline; dead letter; shed: its sender had too many waiting; given back: 503).",
            "settled",
            {how: float(self.door[how]) for how in DOOR_SETTLED},
            gauge=False,
        )
        yield _labelled(
            "codemojex_bot_update_events",
            "The door's events: parked updates taken over from a dead process, unreadable "
            "updates, tries failed with a bug, tries failed with an outage.",
            "event",
            {event: float(self.door[event]) for event in DOOR_EVENTS},
            gauge=False,
        )
        if self.gauges is not None:
            now = self.gauges()
            yield GaugeMetricFamily(
                "codemojex_bot_updates_held",
                "Updates the bot holds now (waiting, running, parked and not finished).",
                value=now.get("held", 0.0),
            )
            yield GaugeMetricFamily(
                "codemojex_bot_standby",
                "1 while another process polls this bot and this one waits (one poller per token).",
                value=now.get("standby", 0.0),
            )
            yield CounterMetricFamily(
                "codemojex_bot_update_id_resets",
                "Times Telegram started its update ids anew below the offset already sent.",
                value=now.get("id_resets", 0.0),
            )
        yield _labelled(
            "codemojex_guesses",
            "Guesses by outcome: the bot counts accepted and refused ones (a worker counts "
            "duplicates).",
            "outcome",
            {ours: self.outcomes[theirs] for theirs, ours in BOT_OUTCOMES.items()},
            gauge=False,
        )
        yield _labelled(
            "codemojex_rounds",
            "Rounds that ended, by how (the workers count won and expired).",
            "end",
            {"ended": EVENTS.rounds_ended},
            gauge=False,
        )
