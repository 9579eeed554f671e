"""A flooding room does not hold up a quiet room's results.

Two things are asserted. Fairness, without timing: every quiet guess sent right behind a
burst of FLOOD_PLAYERS x FLOOD_EACH flood guesses is scored while at least half of the flood
is still waiting (a bot or a queue that served arrivals in order would score it last). And a
deliberately generous time bound, QUIET_BOUND_S, from the player's message to the result
posted (a few tenths of a second without a flood): a pass/fail test, not a benchmark. The
measured figures are printed (pytest -s) for the record.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select

from codemojex.db import Guess, Round
from tests.e2e.harness import DAVE, Announcement, Stack, in_process_worker
from tests.helpers.support import wrong_guess

FLOOD_PLAYERS = 10
FLOOD_EACH = 20  # the bot's lane depth: all of them are accepted
QUIET_ROOMS = 3
QUIET_BOUND_S = 15.0


@dataclass
class Sent:
    chat: int
    round_id: int
    guess: str
    message_id: int
    wall: float  # time.time() when the player sent it (compared with scored_at)
    mono: float  # time.monotonic() when sent (compared with the stand-in's clock)


@dataclass
class Sample:
    scored_s: float  # the player's message -> the guess recorded in Postgres
    posted_s: float  # the player's message -> the result posted in the chat
    flood_left: int  # flood guesses still unscored when this one was scored


async def test_a_flood_does_not_hold_up_a_quiet_room(stack: Stack) -> None:
    flooders = stack.add_players(4001, FLOOD_PLAYERS, "F")
    flood_chat = stack.new_group(members=flooders)
    quiet_chats = [stack.new_group() for _ in range(QUIET_ROOMS)]
    flood_total = FLOOD_PLAYERS * FLOOD_EACH

    async def flood_scored(until: datetime | None = None) -> int:
        stmt = select(func.count()).select_from(Guess).where(Guess.round_id == flood_round.id)
        if until is not None:
            stmt = stmt.where(Guess.scored_at <= until)
        return int(await stack.scalar(stmt))

    def send_quiet(chat: int, ann: Announcement, rnd: Round, n: int) -> Sent:
        guess = "".join(wrong_guess(rnd.secret_emojis, ann.palette, n))
        wall, mono = time.time(), time.monotonic()
        return Sent(chat, rnd.id, guess, stack.standin.send_text(chat, DAVE, guess), wall, mono)

    async def outcome(sent: Sent) -> Sample:
        posted = await stack.result(sent.chat, sent.message_id, "Dave", sent.guess, timeout=90)
        scored_at = await stack.scalar(
            select(Guess.scored_at).where(Guess.round_id == sent.round_id, Guess.text == sent.guess)
        )
        return Sample(
            scored_s=scored_at.timestamp() - sent.wall,
            posted_s=posted.ts - sent.mono,
            flood_left=flood_total - await flood_scored(until=scored_at),
        )

    async with in_process_worker(stack):
        flood_ann, flood_round = await stack.new_round(flood_chat)
        quiet = [(chat, *(await stack.new_round(chat))) for chat in quiet_chats]

        # Without a flood: one guess in each quiet room, one at a time.
        calm = [await outcome(send_quiet(chat, ann, rnd, 1)) for chat, ann, rnd in quiet]

        # The flood: every flooder sends a lane's worth of guesses at once, and the quiet
        # rooms' players guess right behind it (behind it in the bot's updates, too).
        started = time.monotonic()
        for k in range(FLOOD_EACH):
            for p, user in enumerate(flooders):
                n = 7 * (p * FLOOD_EACH + k)
                guess = "".join(wrong_guess(flood_round.secret_emojis, flood_ann.palette, n))
                stack.standin.send_text(flood_chat, user, guess)
        in_flood = [send_quiet(chat, ann, rnd, 2) for chat, ann, rnd in quiet]
        stormy = [await outcome(sent) for sent in in_flood]

        # Nothing of the flood was refused or lost on the way in: every guess is either
        # scored or waiting in its lane (the worker stops here; it would score the rest at
        # the flood room's ceiling, 2 at a time, long after the quiet rooms were served).
        await stack.settle(timeout=120)
        flood_room = await stack.room_id(flood_chat)
        scored_by_then = await flood_scored()
        elapsed_s = time.monotonic() - started
    # Stopped gracefully: the batches in hand were finished and acked.
    backlog = len(await stack.pending_job_ids(flood_room))
    assert await flood_scored() + backlog == flood_total
    assert await stack.lanes.check() == []

    # A worker starting on that backlog (a restart, a deploy) serves the quiet rooms at once.
    async with in_process_worker(stack):
        restarted = [send_quiet(chat, ann, rnd, 3) for chat, ann, rnd in quiet]
        on_backlog = [await outcome(sent) for sent in restarted]

    print(
        f"\nflood: {FLOOD_PLAYERS} players x {FLOOD_EACH} guesses; {scored_by_then} scored "
        f"{elapsed_s:.1f} s after they were sent"
        f"\nquiet without flood: scored {[round(s.scored_s, 2) for s in calm]} s, "
        f"posted {[round(s.posted_s, 2) for s in calm]} s"
        f"\nquiet during flood:  scored {[round(s.scored_s, 2) for s in stormy]} s, "
        f"posted {[round(s.posted_s, 2) for s in stormy]} s, "
        f"flood guesses still unscored then {[s.flood_left for s in stormy]}"
        f"\nquiet on a backlog of {backlog}: "
        f"scored {[round(s.scored_s, 2) for s in on_backlog]} s, "
        f"posted {[round(s.posted_s, 2) for s in on_backlog]} s, "
        f"flood guesses still unscored then {[s.flood_left for s in on_backlog]}"
    )
    # The quiet rooms did not queue behind the flood (in the bot or in the lanes): each quiet
    # guess was scored while most of the flood, sent before it, was still waiting.
    assert all(s.flood_left >= flood_total // 2 for s in stormy)
    # Nor behind the flood's backlog in the lanes.
    assert all(s.flood_left >= backlog // 2 for s in on_backlog)
    for sample in stormy + on_backlog:
        assert sample.scored_s < QUIET_BOUND_S and sample.posted_s < QUIET_BOUND_S
    assert max(s.posted_s for s in calm) < QUIET_BOUND_S
