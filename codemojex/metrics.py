"""The instruments Codemojex observes into, defined once; a leaf any layer may import.

Histograms are observed where their event happens (a scored guess in the score worker, a post
in the sender). Counters the components already keep in their stats objects (ScoreStats,
SenderStats, PoolStats, the bot's guess outcomes) are not counted twice: ops/collect.py reads
them at scrape time. The instruments belong to no registry: each process's metrics endpoint
registers them in its own (ops/server.py).

Clocks: a guess's enqueue time is Redis's clock, its claim and record times the worker's; on
machines whose clocks disagree the waits are off by the skew (keep NTP on).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Final, Protocol

from prometheus_client import Histogram

# Seconds: a quiet room's guess waits milliseconds, a flooded room's minutes.
WAIT_BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
SCORING_BUCKETS: Final = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10)
# Posting is paced at about 20 messages a minute per group: a busy room's results wait.
POST_BUCKETS: Final = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900)

GUESS_WAIT: Final = Histogram(
    "codemojex_guess_wait_seconds",
    "Scored guesses: from the bot's enqueue to a worker's claim.",
    buckets=WAIT_BUCKETS,
    registry=None,
)
GUESS_SCORING: Final = Histogram(
    "codemojex_guess_scoring_seconds",
    "Scored guesses: from the claim to the commit of its score and result.",
    buckets=SCORING_BUCKETS,
    registry=None,
)
RESULT_POST_DELAY: Final = Histogram(
    "codemojex_result_post_delay_seconds",
    "Outbox rows posted: from the commit that wrote the row to Telegram's answer.",
    buckets=POST_BUCKETS,
    registry=None,
)
INSTRUMENTS: Final = (GUESS_WAIT, GUESS_SCORING, RESULT_POST_DELAY)


class Events:
    """Counts of events no stats object keeps (read by the collectors at scrape time)."""

    def __init__(self) -> None:
        self.posts: Counter[str] = Counter()  # by kind: result, folded, reply, round
        self.rounds_ended = 0  # by an admin's /endround (won and expired: the worker's stats)


EVENTS: Final = Events()


def guess_scored(enqueued_ms: int, claimed_ms: int) -> None:
    """A guess was recorded for the first time (the score worker, once per scored guess)."""
    now_ms = time.time() * 1000
    GUESS_WAIT.observe(max(0.0, claimed_ms - enqueued_ms) / 1000)
    GUESS_SCORING.observe(max(0.0, now_ms - claimed_ms) / 1000)


class _Row(Protocol):
    @property
    def id(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def created_at(self) -> datetime: ...


class _Message(Protocol):
    @property
    def row_ids(self) -> tuple[int, ...]: ...
    @property
    def reply_to(self) -> int | None: ...


def posted(message: _Message, rows: Sequence[_Row]) -> None:
    """Telegram accepted `message`, which completes `message.row_ids` of `rows` (the sender):
    count the post by kind and observe each completed row's delay."""
    done = [row for row in rows if row.id in message.row_ids]
    if len(done) > 1:
        kind = "folded"
    elif done and done[0].kind in ("round", "keys_off"):
        kind = done[0].kind  # a round's announcement, or the removal of its keyboard
    elif message.reply_to is not None:
        kind = "reply"
    else:
        kind = "result"
    EVENTS.posts[kind] += 1
    now = datetime.now(UTC)
    for row in done:
        RESULT_POST_DELAY.observe(max(0.0, (now - row.created_at).total_seconds()))
