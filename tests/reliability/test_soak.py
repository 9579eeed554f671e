"""The soak harness (bench/soak/), CI-sized: real bot, real worker processes, private Redis
(AOF, fsync always) and private Postgres, with every fault of the full run injected once or
more: workers SIGKILLed and restarted, Redis SHUTDOWN and restarted, Redis SIGKILLed and
restarted, Postgres stopped for a few seconds, one room's round locked beside other rooms'
guesses, guesses typed while Redis is down, a backlog drained by a bot process SIGKILLed half-way,
and parked admin commands handed over (a SIGKILLed poller; two webhook processes). The
full-size figures are in docs/benchmarks.md, "The soak"."""

from __future__ import annotations

import asyncio
import shutil
from glob import glob

import pytest

from bench.soak import SoakPlan, headline, print_report, run_soak

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("redis-server") is None or not glob("/usr/lib/postgresql/*/bin/initdb"),
        reason="needs redis-server and the PostgreSQL server binaries",
    ),
    pytest.mark.timeout(600),
]


def test_soak_through_the_bot_loses_nothing_and_counts_nothing_twice() -> None:
    plan = SoakPlan(
        via="bot",
        guesses=150,
        rooms=5,
        players=3,
        flood_players=4,
        workers=2,
        concurrency=4,
        lease_ms=2_000,
        kill_every_s=(2.0, 5.0),
        restart_after_s=(0.2, 1.0),
        redis_down_s=1.0,
        pg_outage_s=4.0,
        win_rate=1 / 15,
        backlog=300,
        stuck_chats=5,
        stuck_hold_s=6.0,
        outage=120,
        outage_chats=5,
        outage_down_s=3.0,
        handover_chats=3,
        feed_timeout_s=240,
        drain_timeout_s=180,
        seed=11,
    )
    report = asyncio.run(run_soak(plan, say=lambda _line: None))
    print_report(report)

    assert headline(report) == {key: 0 for key in headline(report)}, report
    assert report["accepted"] >= plan.guesses
    assert report["backlog_guesses"] == plan.backlog  # drained by a bot killed half-way
    assert report["outage_guesses"] == plan.outage  # typed while Redis was down
    assert report["stuck_guesses"] == plan.stuck_chats * 4 * 5  # beside a locked room
    assert report["stored_exactly_once"] == report["accepted"]
    assert report["left_in_queue"] == {"pending": 0, "active": 0, "delayed": 0}
    assert report["dead_jobs"] == 0
    assert report["bot_errors"] == 0, report["bot_error_examples"]
    # A second post of a row happens only when a worker was SIGKILLed right after Telegram
    # accepted it (the sender is at-least-once): every double post has a kill next to it.
    assert report["outbox_posted_twice_unexplained"] == 0, report[
        "outbox_posted_twice_unexplained_examples"
    ]
    assert report["outbox_posted_twice_messages_unexplained"] == 0
    assert report["outbox_assumed_sent_not_posted"] == 0  # "repost" marks nothing unposted
    assert report["samples"] > 0
    # Every fault was really injected.
    events = "\n".join(report["faults"])
    assert "redis SHUTDOWN" in events
    assert "redis SIGKILL" in events
    assert "postgres stop" in events
    assert report["workers"]["sigkills"] >= 1
    assert report["redis_starts"] == 4  # the outage phase's too
