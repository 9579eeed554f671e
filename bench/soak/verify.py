"""Verifying a soak: every accepted guess stored once, the books agree with the rows, every
round has at most one winner, every outbox row posted once (or its double explained by a
kill), the lanes sound."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bench.backlog_world import Backlog
from bench.soak.world import KILL_WINDOW_S, Observed, RecordingLanes, Sampler, SoakState
from codemojex.db import (
    Guess,
    LeaderboardEntry,
    Outbox,
    Player,
    Round,
)
from codemojex.game import texts
from codemojex.locale import EN, LANGUAGES
from codemojex.posting.fold import STANDALONE_KINDS
from codemojex.standin import SentMessage, StandIn


async def verify(
    soak: SoakState,
    standin: StandIn,
    lanes: RecordingLanes,
    sessionmaker: async_sessionmaker[AsyncSession],
    obs: Observed,
) -> dict[str, Any]:
    """The report of a soak: its rows, its posts, the bot's side, the lanes' (in that order)."""
    async with sessionmaker() as session:
        guesses = (await session.execute(select(Guess))).scalars().all()
        users = {
            player_id: tg_user_id
            for player_id, tg_user_id in await session.execute(select(Player.id, Player.tg_user_id))
        }
        rounds = (await session.execute(select(Round))).scalars().all()
        board = (await session.execute(select(LeaderboardEntry))).scalars().all()
        outbox = (await session.execute(select(Outbox))).scalars().all()
        await session.commit()
    typed = {}
    accepted = set(lanes.accepted)
    for name in ("backlog", "stuck", "outage", "failover", "webhook"):
        found = check_typed(name, getattr(soak, name, None), guesses, users)
        # The backlog phase's guesses were taken by bot processes: found by their origin.
        accepted |= found.pop("ids")
        typed.update(found)
    phases = {
        **getattr(soak, "stuck_report", {}),
        **getattr(soak, "outage_report", {}),
        **getattr(soak, "handover_report", {}),
    }
    # Message ids are per chat, as on Telegram.
    sent = {(m.chat_id, m.message_id): m for m in standin.sent_messages() if m.chat_id < 0}
    return {
        **typed,
        **phases,
        **check_rows(accepted, guesses, rounds, board, outbox),
        **check_posts(soak, sent, outbox),
        **bot_side(soak, standin, sent),
        **await check_lanes(lanes, accepted, obs),
    }


def check_rows(
    accepted: set[str],
    guesses: Sequence[Guess],
    rounds: Sequence[Round],
    board: Sequence[LeaderboardEntry],
    outbox: Sequence[Outbox],
) -> dict[str, Any]:
    """Every accepted guess stored once, the leaderboard and the winners agree with the guess
    rows, one result row per scored guess, at most one late row per late guess (its member's
    answer budget may leave it unsaid) and one win row per won round."""
    stored_ids = Counter(g.id for g in guesses)
    stored = set(stored_ids)
    lost = accepted - stored
    duplicated_rows = sum(n - 1 for n in stored_ids.values())

    # Leaderboard vs guesses: every scored (not late) guess counted once, every win once.
    length_of = {r.id: r.length for r in rounds}
    scored_per_player = Counter(g.player_id for g in guesses if not g.late)
    wins_per_player = Counter(r.winner_player_id for r in rounds if r.winner_player_id)
    board_mismatch = 0
    for entry in board:
        if entry.guesses != scored_per_player.get(entry.player_id, 0):
            board_mismatch += 1
        if entry.wins != wins_per_player.get(entry.player_id, 0):
            board_mismatch += 1
    board_players = {e.player_id for e in board}
    board_mismatch += sum(1 for p in scored_per_player if p not in board_players)

    # Rounds: at most one all-exact guess scored in time per round, and it is the winner.
    winners = Counter(
        g.round_id for g in guesses if not g.late and g.exact == length_of.get(g.round_id)
    )
    multi_winner = sum(1 for n in winners.values() if n > 1)
    winner_mismatch = sum(
        1 for r in rounds if (r.winner_player_id is not None) != (winners.get(r.id, 0) == 1)
    )

    # Outbox: one result row per scored guess, at most one late row per late guess (a "too
    # late" line spends its member's answer budget: past it, nothing is said), one win row
    # per won round.
    per_guess = Counter(o.guess_id for o in outbox if o.kind in ("result", "late"))
    outbox_dup_rows = sum(n - 1 for n in per_guess.values() if n > 1)
    late_ids = {g.id for g in guesses if g.late}
    outbox_missing_rows = sum(
        1 for gid in stored if gid not in late_ids and per_guess.get(gid, 0) == 0
    )
    late_unsaid = sum(1 for gid in late_ids if per_guess.get(gid, 0) == 0)
    win_rows = Counter(o.round_id for o in outbox if o.kind == "win")
    outbox_dup_rows += sum(n - 1 for n in win_rows.values() if n > 1)

    not_sent = sum(1 for o in outbox if o.sent_at is None)
    failed = sum(1 for o in outbox if o.sent_at is not None and o.sent_message_id is None)
    return {
        "accepted": len(accepted),
        "stored_exactly_once": len(accepted & stored),
        "lost": len(lost),
        "lost_examples": sorted(lost)[:10],
        "duplicated": duplicated_rows,
        "stored_without_ack": len(stored - accepted),
        "late_guesses": len(late_ids),
        "late_unsaid": late_unsaid,
        "leaderboard_mismatches": board_mismatch,
        "rounds": len(rounds),
        "rounds_won": sum(1 for r in rounds if r.winner_player_id),
        "rounds_multi_winner": multi_winner,
        "rounds_winner_mismatch": winner_mismatch,
        "outbox_rows": len(outbox),
        "outbox_duplicate_rows": outbox_dup_rows,
        "outbox_missing_rows": outbox_missing_rows,
        "outbox_not_sent": not_sent,
        "outbox_failed": failed,
    }


def check_typed(
    name: str, backlog: Backlog | None, guesses: Sequence[Guess], users: dict[str, int]
) -> dict[str, Any]:
    """A phase's typed guesses stored exactly once (the backlog's, the stuck and the outage
    phases'): each of its players has exactly the guesses they typed in their room's round
    (fewer: lost; more: one taken twice)."""
    if backlog is None:
        return {f"{name}_guesses": 0, f"{name}_lost": 0, f"{name}_twice": 0, "ids": set()}
    want = backlog.expected()
    rows = [g for g in guesses if (g.round_id, users.get(g.player_id)) in want]
    got = Counter((g.round_id, users[g.player_id]) for g in rows)
    return {
        f"{name}_guesses": sum(want.values()),
        f"{name}_lost": sum(max(0, n - got.get(key, 0)) for key, n in want.items()),
        f"{name}_twice": sum(max(0, got.get(key, 0) - n) for key, n in want.items()),
        "ids": {g.id for g in rows},
    }


def check_posts(
    soak: SoakState, sent: dict[tuple[int, int], SentMessage], outbox: Sequence[Outbox]
) -> dict[str, Any]:
    """Every row posted once: carried by the post it was marked with and by no other, or its
    second copy explained by a worker killed mid-post."""
    # Posts: a row is sent once when it was marked with the message that carried it and
    # no other post of the chat carried it too.
    rows_by_message: dict[tuple[int, int], list[Outbox]] = defaultdict(list)
    for o in outbox:
        if o.sent_message_id is not None:
            rows_by_message[(o.chat_id, o.sent_message_id)].append(o)
    marked_not_posted, examples = _marked_not_posted(sent, rows_by_message)
    lines_by_chat, unmarked_rows, rows_by_line = _lines(outbox)
    unmarked_posted: set[int] = set()
    # A post no row was marked with, but carrying rows' text, is a second post of them.
    kills = sorted(soak.fleet.kill_times)
    ambiguous_rows = set(soak.fleet.recovered_ambiguous())

    def kill_gap(ts: float) -> float:
        return min((abs(k - ts) for k in kills), default=float("inf"))

    posted_twice = twice_messages = 0
    unexplained = unexplained_messages = 0
    kill_gaps: list[float] = []
    extra_posts_per_line: Counter[tuple[int, str]] = Counter()
    twice_examples: list[str] = []
    unexplained_examples: list[str] = []
    direct_replies = Counter[str]()
    for m in sorted(sent.values(), key=lambda m: m.ts):
        if (m.chat_id, m.message_id) in rows_by_message:
            continue
        known = lines_by_chat.get(m.chat_id, set())
        if m.text in known or m.raw_text in known:
            lines = [m.text if m.text in known else m.raw_text]
        else:
            lines = [ln for ln in m.text.split("\n") if ln in known]
        if not lines:
            direct_replies[m.text[:60]] += 1
            continue
        extra: list[str] = []
        for line in lines:
            owner = next(
                (i for i in unmarked_rows.get((m.chat_id, line), ()) if i not in unmarked_posted),
                None,
            )
            if owner is None:
                extra.append(line)
            else:
                unmarked_posted.add(owner)
        if not extra:
            continue
        posted_twice += len(extra)
        twice_messages += 1
        for line in extra:
            extra_posts_per_line[(m.chat_id, line)] += 1
        twice_examples.append(m.text[:120])
        gap = kill_gap(m.ts)
        # Rows of this copy its successor did not find mid-post (intent, no posted marker).
        not_mid_post = [
            line
            for line in extra
            if not ambiguous_rows.intersection(rows_by_line[(m.chat_id, line)])
        ]
        if gap <= KILL_WINDOW_S and not not_mid_post:
            kill_gaps.append(gap)
        else:
            unexplained += len(extra)
            unexplained_messages += 1
            unexplained_examples.append(
                f"{m.text[:80]!r}: nearest kill {gap:.2f}s away, "
                f"{len(not_mid_post)} of {len(extra)} rows not recovered mid-post"
            )
    assumed = [
        o
        for o in outbox
        if o.sent_at is not None and o.sent_message_id is None and o.id not in unmarked_posted
    ]
    assumed_not_posted = len(assumed)

    return {
        "outbox_posted_twice": posted_twice,
        "outbox_posted_twice_unexplained": unexplained,
        "outbox_posted_twice_messages": twice_messages,
        "outbox_posted_twice_messages_unexplained": unexplained_messages,
        "outbox_posted_twice_unexplained_examples": unexplained_examples[:5],
        "outbox_posted_twice_kill_gap_max_s": round(max(kill_gaps), 3) if kill_gaps else None,
        "outbox_assumed_sent_not_posted": assumed_not_posted,
        "outbox_assumed_sent_examples": [(o.kind, o.round_id, o.text[:40]) for o in assumed][:5],
        "kill_window_s": KILL_WINDOW_S,
        "posts_near_a_kill_share": round(
            sum(1 for m in sent.values() if kill_gap(m.ts) <= KILL_WINDOW_S) / len(sent), 3
        )
        if sent
        else None,
        "outbox_posted_three_times_or_more": sum(1 for n in extra_posts_per_line.values() if n > 1),
        "outbox_posted_twice_examples": twice_examples[:5],
        "outbox_marked_not_posted": marked_not_posted,
        "outbox_marked_not_posted_examples": examples[:5],
        "posts": len(sent),
        "bot_direct_replies": dict(direct_replies.most_common(8)),
    }


def _marked_not_posted(
    sent: dict[tuple[int, int], SentMessage], rows_by_message: dict[tuple[int, int], list[Outbox]]
) -> tuple[int, list[Any]]:
    """Rows marked sent with a message that does not carry them (or does not exist)."""
    marked_not_posted = 0
    examples: list[Any] = []
    for (chat_id, mid), rows in rows_by_message.items():
        post = sent.get((chat_id, mid))
        if post is None:
            marked_not_posted += len(rows)
            examples.append((chat_id, mid, "no such post"))
            continue
        body = post.raw_text or post.text
        for o in rows:
            if o.text not in body and o.text not in post.text:
                marked_not_posted += 1
                examples.append((o.text[:80], post.text[:200]))
    return marked_not_posted, examples


def _lines(
    outbox: Sequence[Outbox],
) -> tuple[dict[int, set[str]], dict[tuple[int, str], list[int]], dict[tuple[int, str], list[int]]]:
    """The lines a post may carry a row as (alone, or named when folded with others): per
    chat; the rows marked done with no message id (assumed sent, or refused for good: a post
    of their line no row was marked with is their one copy, not a second one); every row.
    A "slow down" row (a "too late" line past its member's budget) is left out: the bot's
    own answers say the very same line, so a post of it tells nothing about the row."""
    lines_by_chat: dict[int, set[str]] = defaultdict(set)
    unmarked_rows: dict[tuple[int, str], list[int]] = defaultdict(list)
    rows_by_line: dict[tuple[int, str], list[int]] = defaultdict(list)
    said_by_the_bot = {texts.answers_spent(lang) for lang in LANGUAGES}
    for o in outbox:
        if o.text in said_by_the_bot:
            continue
        variants = [o.text]
        if o.player_name and o.kind not in STANDALONE_KINDS:
            variants.append(f"{o.player_name}: {o.text}")
        lines_by_chat[o.chat_id].update(variants)
        for line in variants:
            rows_by_line[(o.chat_id, line)].append(o.id)
        if o.sent_at is not None and o.sent_message_id is None:
            for line in variants:
                unmarked_rows[(o.chat_id, line)].append(o.id)
    return lines_by_chat, unmarked_rows, rows_by_line


def bot_side(
    soak: SoakState, standin: StandIn, sent: dict[tuple[int, int], SentMessage]
) -> dict[str, Any]:
    """Telegram's limits as the stand-in enforced them, and what the bot refused or failed."""
    return {
        "retry_after": standin.rate_violations,
        "retry_after_rules": dict(Counter(v.rule for v in standin.violations)),
        "retry_after_examples": [
            (v.rule, v.chat_id, round(v.ts - soak.faults.t0, 1)) for v in standin.violations
        ][:5],
        "try_again_replies": sum(1 for m in sent.values() if m.text == texts.try_again(EN)),
        "refused_enqueues": dict(soak.refused),
        "bot_errors": len(soak.bot_errors),
        "bot_error_examples": soak.bot_errors[:5],
    }


async def check_lanes(lanes: RecordingLanes, accepted: set[str], obs: Observed) -> dict[str, Any]:
    """The lanes sound at the end (check, no drift), nothing left queued, the ceilings held
    all along (the sampler's observations)."""
    faults = await lanes.check()
    snap = await lanes.snapshot()
    final = Sampler(lanes.client, lanes.queue)
    await final.sample()
    end_drift = final.obs.drift_samples
    dead_raw: list[Any] = await lanes.client.zrange(lanes.keys.dead, 0, -1)
    dead_ids = [bytes(d).decode() for d in dead_raw]

    over_ceiling_rooms = sum(
        1
        for room, peak in obs.max_in_flight.items()
        if room in obs.ceiling_seen and peak > obs.ceiling_seen[room]
    )
    return {
        "check": faults,
        "dead_jobs": len(dead_ids),
        "dead_accepted": len(set(dead_ids) & accepted),
        "left_in_queue": {
            "pending": sum(int(r["pending"]) for r in snap["rooms"].values()),
            "active": snap["active"],
            "delayed": snap["delayed"],
        },
        "drift_at_end": end_drift,
        "samples": obs.samples,
        "sample_errors": obs.sample_errors,
        "drift_samples": obs.drift_samples,
        "drift_examples": obs.drift_examples,
        "over_ceiling_samples": obs.over_ceiling_samples,
        "over_ceiling_rooms": over_ceiling_rooms,
        "over_examples": obs.over_examples,
        "max_in_flight_vs_ceiling": dict(
            sorted(
                Counter(
                    f"{obs.max_in_flight.get(r, 0)}/{c}" for r, c in obs.ceiling_seen.items()
                ).items()
            )
        ),
    }
