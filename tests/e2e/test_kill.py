"""A `codemojex worker` process killed with SIGKILL between recording a batch and acking it,
then restarted: no guess lost, none counted twice, every result posted once, the lanes sound
again."""

from __future__ import annotations

import ast
import asyncio
import random
import re
import signal
import time
from collections import Counter
from pathlib import Path

from sqlalchemy import select

from codemojex.db import Guess, LeaderboardEntry, Player
from codemojex.game import texts
from codemojex.locale import EN
from tests.e2e.harness import ADMIN, Stack, WorkerProcess, eventually, times_posted

PLAYERS = 8
PER_PLAYER = 12  # under the bot's lane depth (20): every one of them is accepted
LEASE_MS = 2000  # a short lease, so the dead worker's batches are reaped quickly


async def test_a_worker_killed_mid_batch_loses_nothing_and_counts_nothing_twice(
    stack: Stack, tmp_path: Path
) -> None:
    users = stack.add_players(3001, PLAYERS, "P")
    chat = stack.new_group(members=users)
    say = stack.standin.send_text

    # No worker yet: the bot alone takes the round and the guesses, the backlog builds up.
    say(chat, users[0], "/newgame")
    await stack.settle()
    rnd = await stack.open_round(chat)
    assert rnd is not None
    palette, secret = rnd.palette_emojis, rnd.secret_emojis
    room = await stack.room_id(chat)
    # Long batches: the room may have 30 guesses in flight, each player 12 per turn.
    mid = say(chat, ADMIN, "/limit 30")
    assert await stack.reply_to(chat, mid) == texts.limit_set(EN, 30)

    codes = [
        tuple(palette[(n // len(palette) ** i) % len(palette)] for i in range(rnd.length))
        for n in range(len(palette) ** rnd.length)
    ]
    codes = [c for c in codes if c != secret]
    firsts: dict[int, int] = {}
    for k in range(PER_PLAYER):
        for p, user in enumerate(users):
            code = codes[(p * PER_PLAYER + k) * 7 % len(codes)]
            message_id = say(chat, user, "".join(code))
            firsts.setdefault(user, message_id)
    await stack.settle()
    # (Sent together: the answers fold into the few posts a group's minute has for them.)
    for message_id in firsts.values():
        say(chat, ADMIN, "/weight 12", reply_to=message_id)
    await stack.settle()
    lanes = (await stack.lanes.snapshot(room))["rooms"][room]["lanes"]
    assert [info["weight"] for info in lanes.values()] == [12] * len(users)
    enqueued = await stack.pending_job_ids(room)
    assert len(enqueued) == PLAYERS * PER_PLAYER
    total = len(enqueued)

    env = stack.env(CODEMOJEX_LEASE_MS=str(LEASE_MS), CODEMOJEX_CONCURRENCY="4")
    log = tmp_path / "worker.log"
    first = WorkerProcess(env, log)
    second = WorkerProcess(env, log)
    try:
        await first.start()

        async def up() -> bool:  # it checks the schema first: let it start unfrozen
            return "worker up" in first.output()

        await eventually(up, timeout=60, what="the worker up")

        async def mid_batch() -> set[str]:
            """Guesses recorded whose batch is still in hand (committed, not yet acked), with
            some of the backlog not recorded yet. The worker records the batches in hand in
            one transaction and acks them right after, so that window is short: freeze the
            worker (SIGSTOP) at arbitrary instants and look, until one lands in it."""
            first.signal(signal.SIGSTOP)
            # What it had already sent (a COMMIT, an ack) still lands: let it, then look.
            await asyncio.sleep(0.05)
            recorded = set(await stack.all(select(Guess.id)))
            leased = await stack.leased_job_ids()
            caught = recorded & leased
            if len(caught) >= 2 and len(recorded) < total:
                return caught
            first.signal(signal.SIGCONT)
            # A short run between looks: a batch is looked at many times on its way, so one
            # of them lands between its commit and its ack even on a loaded machine (with up
            # to 4 ms, the 8 or so batches of the backlog were once all done unseen).
            await asyncio.sleep(random.uniform(0.0, 0.001))
            return set()

        await eventually(mid_batch, timeout=60, interval=0, what="a batch recorded, not acked")
        first.signal(signal.SIGKILL)
        assert await first.wait() == -signal.SIGKILL

        # The state the dead worker left: leases in hand, some of them already recorded.
        in_hand = await stack.leased_job_ids()
        recorded_at_kill = {g.id for g in await stack.all(select(Guess))}
        recorded_unacked = in_hand & recorded_at_kill
        assert in_hand, f"killed between batches; worker log:\n{first.output()}"
        assert recorded_at_kill < enqueued
        print(
            f"\nkill: {len(recorded_at_kill)}/{total} recorded, {len(in_hand)} leased in "
            f"hand, {len(recorded_unacked)} of them recorded but not acked"
        )

        restarted = time.monotonic()
        await second.start()

        async def all_recorded() -> bool:
            return await stack.guess_count() == total

        await eventually(all_recorded, timeout=60, interval=0.1, what="every guess recorded")
        recorded_s = time.monotonic() - restarted
        # The dead worker's chat lease (20 s) and row claims run out before it posts again.
        rows = await stack.all_posted(timeout=90)

        async def drained() -> bool:
            snap = await stack.lanes.snapshot()
            return snap["active"] == 0 and all(r["pending"] == 0 for r in snap["rooms"].values())

        await eventually(drained, timeout=10, what="lanes drained")
        print(
            f"restart: every guess recorded after {recorded_s:.1f} s, "
            f"every row posted after {time.monotonic() - restarted:.1f} s"
        )
        second.signal(signal.SIGTERM)
        assert await second.wait() == 0, second.output()
        # The restarted worker got the dead one's batches again (the leases ran out), took
        # the guesses already recorded for duplicates, and recorded exactly the others. (On a
        # loaded machine a 2 s lease may also run out under the live worker: that batch is
        # served again and its guesses are duplicates too; its stale ack is refused.)
        second_log = second.output()
        (summary,) = re.findall(r"worker stopped: (\{.*\})", second_log)
        counters = ast.literal_eval(summary)
        assert counters["pool_reaped"] >= len(in_hand)
        assert counters["score_duplicates"] >= len(recorded_unacked)
        assert counters["score_scored"] == total - len(recorded_at_kill)
        print(f"restarted worker: {counters}")
    finally:
        await first.ensure_gone()
        await second.ensure_gone()

    # Every enqueued guess is in Postgres exactly once, scored (never late: no win).
    guesses = await stack.all(select(Guess))
    assert Counter(g.id for g in guesses) == Counter(enqueued)
    assert not any(g.late for g in guesses)
    # Counted once: each player's attempts are exactly 1..20, and the leaderboard agrees.
    players = {p.id: p.tg_user_id for p in await stack.all(select(Player))}
    attempts: dict[int, list[int]] = {}
    for g in guesses:
        attempts.setdefault(players[g.player_id], []).append(g.attempt_no or 0)
    assert {u: sorted(a) for u, a in attempts.items()} == {
        u: list(range(1, PER_PLAYER + 1)) for u in users
    }
    board = {players[e.player_id]: e.guesses for e in await stack.all(select(LeaderboardEntry))}
    assert board == {u: PER_PLAYER for u in users}

    # Every result row written once and posted once.
    results = [r for r in rows if r.kind == "result"]
    assert Counter(r.guess_id for r in results) == Counter(enqueued)
    posted = stack.standin.sent_messages(chat)
    assert all(r.sent_message_id is not None for r in rows)
    times = {r.id: times_posted(posted, r) for r in rows}
    # A row goes out twice only if the first worker died during its post (its intent marker
    # without a posted marker: the sender is at least once, docs/architecture.md), and the
    # restarted worker says which rows those were.
    maybe_twice = {
        int(row_id)
        for listed in re.findall(r"being posted when their sender died \(([\d,]+)\)", second_log)
        for row_id in listed.split(",")
    }
    assert all(n == 1 or (n == 2 and row_id in maybe_twice) for row_id, n in times.items()), (
        {row_id: n for row_id, n in times.items() if n != 1},
        maybe_twice,
    )

    # The lanes are sound and nothing is left in flight.
    assert await stack.lanes.check() == []
    assert set((await stack.in_flight()).values()) <= {0}
    snap = await stack.lanes.snapshot()
    assert (snap["active"], snap["delayed"], snap["dead"]) == (0, 0, 0)
