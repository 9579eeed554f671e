"""Soak: thousands of guesses through the real bot and worker pool while the harness breaks things.

What runs (all private to the run, all on loopback, all started and stopped by PID):

* its own Redis (`redis-server --appendonly yes --appendfsync always`, a temp dir);
* its own Postgres (initdb into a temp dir, pg_ctl on a free port, trust auth), migrated
  with `codemojex.db.upgrade`; the machine's shared Postgres is never touched;
* the Bot API stand-in and the real bot (`build_application` + `running`) in this process:
  simulated players type `/g …` and plain emoji guesses with `send_text`, so every guess goes
  through python-telegram-bot, the bot's validation and `lanes.enqueue`;
* N `codemojex worker` subprocesses on a short lease.

Faults: worker processes are SIGKILLed at random moments and restarted; Redis is stopped with
a clean SHUTDOWN and later with SIGKILL and restarted (AOF with fsync always keeps the queue);
Postgres is stopped (pg_ctl -m fast) for `pg_outage_s` seconds. Then the backlog phase
(`backlog` guesses, bench/soak/backlog.py): the in-process bot stops, the guesses are typed
while no bot runs, and a `codemojex bot` process drains them, SIGKILLed once half of them are
confirmed and restarted; each must end up stored exactly once (`backlog_lost`,
`backlog_twice`: the stand-in confirms as Telegram does, so only a bot that confirms what it
has not stored could lose one). A sampler reads, atomically,
`gactive`, `glimit` and the room of every leased job all along, and records per room the most
jobs seen in flight against the ceiling, and any sample where `gactive` differed from the real
number of leases.

Afterwards it counts: accepted guesses (job ids `lanes.enqueue` returned to the bot), which of
them are in Postgres (lost = accepted - stored), rows beyond one per guess (leaderboard counts
and result/late outbox rows per guess are compared too), rounds with more than one winner,
outbox rows posted twice or never, `lanes.check()`, drift and over-ceiling observations.

Every outbox row posted twice must be explained by a worker killed in the middle of posting
it: a SIGKILL within `KILL_WINDOW_S` of the first copy (the stand-in notes when it accepted
each post, the harness when it sent each SIGKILL), and the row found by the next sender with
an intent marker and no posted marker (its log line names the rows). A sender killed between
Telegram accepting a post and its "posted" marker leaves rows the next sender posts again
(`ambiguous="repost"`, the default) or marks sent without posting (`--ambiguous
assume_sent`). A double post without both is a fault, counted in
`outbox_posted_twice_unexplained`, and is in the headline. `posts_near_a_kill_share` is the
share of all posts that have a kill that near: how often the time test alone would pass.

    .venv/bin/python -m bench.soak --guesses 20000 --rooms 200 --save   # bench/results/soak.json

The CI-sized run is tests/reliability/test_soak.py.
"""

from __future__ import annotations

from bench.soak.report import headline, print_report
from bench.soak.run import run_soak
from bench.soak.world import SoakPlan

__all__ = ["SoakPlan", "headline", "print_report", "run_soak"]
