"""What is not one part's own: Telegram's limits, a room's settings that several parts check,
and the named retry policies. Everything else is its owner's: a documented constant and
keyword default where it is used, a setting's range a bound type there (`lanes/facade.py`
`DeadMax`), which `Settings` types its field with. Each group here says why it is shared.
Measurements behind a value: docs/benchmarks.md; what changed and when: CHANGELOG.md. Nothing
here imports the project; code that reads a limit per guess binds it to a module constant."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

_DAY_S: Final = 24 * 3600


@dataclass(frozen=True, slots=True)
class TelegramLimits:
    """Telegram's own limits: not ours to choose."""

    # A message's length in UTF-16 code units: what a post holds; anything longer is no guess.
    message_chars_max: int = 4096
    # The published posting rates, the defaults of the settings CODEMOJEX_PACE_*.
    chat_per_s: int = 1
    group_per_min: int = 20
    bot_per_s: int = 30
    # What one getUpdates returns at most, and setWebhook's max_connections at most.
    updates_max: int = 100
    # The webhook's secret header: 1-256 of A-Z a-z 0-9 _ -.
    webhook_secret_max: int = 256


TELEGRAM: Final = TelegramLimits()


@dataclass(frozen=True, slots=True)
class RoomLimits:
    """A room's settings an admin may change. Shared: the lanes apply the ceiling and the
    worker's round timer the timeout; /limit, the ops page and the use-cases check what an
    admin asks for against the same range; CODEMOJEX_DEFAULT_CEILING and
    CODEMOJEX_ROUND_TIMEOUT_S give new rooms theirs, and a daily room (values/daily.py, below
    every other reader) is built with the defaults."""

    # A room's guesses in flight at once: every room has a ceiling, so none holds every worker.
    ceiling_min: int = 1
    ceiling_max: int = 1000
    ceiling_default: int = 2
    # A round's timeout; the round timer looks at rounds at the minimum's pace.
    round_timeout_s_min: int = 30
    round_timeout_s_max: int = 7 * _DAY_S
    round_timeout_s_default: int = 600


ROOM: Final = RoomLimits()


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """The wait after n failures (outages.pause_s): base_s * 2^(n-1) capped at cap_s, with
    `jitter` uniform in [0, that], at least floor_s; `outages.retrying` gives up after
    `give_up_s` of failures (None: when its caller stops)."""

    name: str  # the label of codemojex_retries_total
    base_s: float
    cap_s: float
    give_up_s: float | None = None
    jitter: bool = False
    floor_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Retries:
    """The named retry policies, kept together although most have one reader: a distinct one
    only where its numbers differ for a reason (tests/test_limits.py compares them), each
    the label of one series of codemojex_retries_total, all waited by `outages.pause_s`."""

    # A failed job's delay in its lane (pool retries, the worker's hand-back): the lane paces it.
    job: RetryPolicy = RetryPolicy("job", base_s=0.5, cap_s=30.0, jitter=True)
    # A loop of ours after a failure (outbox scan, round timer, getUpdates, outage probe,
    # schema check): the same backoff, but never a hot loop.
    loop: RetryPolicy = RetryPolicy("loop", base_s=0.5, cap_s=30.0, jitter=True, floor_s=0.2)
    # An update waiting out an outage, or tried again after a bug: quick, it holds its sender.
    update: RetryPolicy = RetryPolicy("update", base_s=0.2, cap_s=5.0, jitter=True, floor_s=0.05)
    # The score worker's flush: quick tries while it holds the batch (worker/score.py HOLD_S).
    record: RetryPolicy = RetryPolicy("record_guesses", base_s=0.1, cap_s=2.0)
    # The sender's mark_sent, until it stops (its markers keep rows from going out twice).
    mark_sent: RetryPolicy = RetryPolicy("mark_sent", base_s=0.2, cap_s=5.0)


RETRIES: Final = Retries()
