"""The soak's report: the headline counts that must be zero, and the printout."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def headline(report: dict[str, Any]) -> dict[str, int]:
    """The four numbers docs/benchmarks.md quotes, plus the other must-be-zero counts.

    `outbox_posted_twice` is not among them: a worker SIGKILLed after Telegram accepted a post
    and before it wrote down that it did leaves a row that the next sender posts again (the
    sender is at-least-once by default: Telegram has no idempotency key). A double post with
    no SIGKILL near its first copy (`outbox_posted_twice_unexplained`), or a row never posted,
    would be a fault, and is here; so is every RetryAfter the stand-in (enforcing Telegram's
    limits) had to answer."""
    return {
        "lost": report["lost"],
        "duplicated": report["duplicated"],
        "drift": report["drift_samples"] + max(0, report["drift_at_end"]),
        "over_ceiling": report["over_ceiling_samples"],
        "check_faults": len(report["check"]),
        "multi_winner_rounds": report["rounds_multi_winner"],
        "outbox_not_sent": report["outbox_not_sent"],
        "retry_after": report["retry_after"],
        "outbox_posted_twice_unexplained": report["outbox_posted_twice_unexplained"],
        "outbox_duplicate_rows": report["outbox_duplicate_rows"],
        "outbox_missing_rows": report["outbox_missing_rows"],
        "leaderboard_mismatches": report["leaderboard_mismatches"],
        "backlog_lost": report["backlog_lost"],
        "backlog_twice": report["backlog_twice"],
        "stuck_lost": report["stuck_lost"],
        "stuck_twice": report["stuck_twice"],
        "stuck_others_late": report.get("stuck_others_late", 0),
        "stuck_command_lost": report.get("stuck_command_lost", 0),
        "outage_lost": report["outage_lost"],
        "outage_twice": report["outage_twice"],
        "outage_notices_over_one": report.get("outage_notices_over_one", 0),
        **{
            f"{phase}_{what}": report.get(f"{phase}_{what}", 0)
            for phase in ("failover", "webhook")
            for what in ("lost", "twice", "out_of_order", "commands_lost")
        },
    }


def print_report(report: dict[str, Any], say: Callable[[str], None] = print) -> None:
    say("")
    say("faults injected:")
    for line in report["faults"]:
        say(f"  {line}")
    say("")
    keys = [
        "backlog_guesses",
        "backlog_lost",
        "backlog_twice",
        "stuck_guesses",
        "stuck_others_taken_s",
        "stuck_others_late",
        "stuck_command_lost",
        "stuck_lost",
        "stuck_twice",
        "outage_guesses",
        "outage_chats_told",
        "outage_notices_over_one",
        "outage_lost",
        "outage_twice",
        *(
            f"{phase}_{what}"
            for phase in ("failover", "webhook")
            for what in ("guesses", "lost", "twice", "out_of_order", "commands_lost")
        ),
        "accepted",
        "stored_exactly_once",
        "lost",
        "duplicated",
        "stored_without_ack",
        "late_guesses",
        "late_unsaid",
        "leaderboard_mismatches",
        "rounds",
        "rounds_won",
        "rounds_multi_winner",
        "rounds_winner_mismatch",
        "outbox_rows",
        "outbox_duplicate_rows",
        "outbox_missing_rows",
        "outbox_not_sent",
        "outbox_posted_twice",
        "outbox_posted_twice_unexplained",
        "retry_after",
        "retry_after_rules",
        "retry_after_examples",
        "outbox_posted_twice_messages",
        "outbox_posted_twice_messages_unexplained",
        "outbox_posted_twice_kill_gap_max_s",
        "posts_near_a_kill_share",
        "outbox_posted_three_times_or_more",
        "outbox_assumed_sent_not_posted",
        "outbox_marked_not_posted",
        "posts",
        "try_again_replies",
        "refused_enqueues",
        "bot_errors",
        "dead_jobs",
        "drift_at_end",
        "samples",
        "drift_samples",
        "over_ceiling_samples",
        "over_ceiling_rooms",
    ]
    for key in keys:
        say(f"  {key:28} {report.get(key)}")
    for key in (
        "outbox_posted_twice_examples",
        "outbox_posted_twice_unexplained_examples",
        "outbox_marked_not_posted_examples",
    ):
        if report.get(key):
            say(f"  {key}: {report[key]}")
    say(f"  {'lanes.check()':28} {report['check'] or 'clean'}")
    say(f"  {'left in queue':28} {report['left_in_queue']}")
    say(f"  {'max in flight / ceiling':28} {report['max_in_flight_vs_ceiling']}")
    say(f"  {'workers':28} {report['workers']}")
    say(f"  {'timing':28} {report['timing']}")
    say("")
    say("headline: " + ", ".join(f"{k} {v}" for k, v in headline(report).items()))
