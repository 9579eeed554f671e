"""`python -m bench.soak`: the soak from the command line (bench/soak/__init__.py says what it
does)."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sys
from pathlib import Path

from bench.soak import __doc__ as soak_doc
from bench.soak.report import headline, print_report
from bench.soak.run import run_soak
from bench.soak.world import SoakPlan

ROOT = Path(__file__).resolve().parents[2]
SAVED = Path("bench/results/soak.json")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(soak_doc or "").split("\n\n", 1)[0])
    d = SoakPlan()
    parser.add_argument("--via", choices=("bot", "lanes"), default=d.via)
    parser.add_argument("--guesses", type=int, default=d.guesses)
    parser.add_argument("--rooms", type=int, default=d.rooms)
    parser.add_argument("--players", type=int, default=d.players)
    parser.add_argument("--flood-players", type=int, default=d.flood_players)
    parser.add_argument("--workers", type=int, default=d.workers)
    parser.add_argument("--concurrency", type=int, default=d.concurrency)
    parser.add_argument("--lease-ms", type=int, default=d.lease_ms)
    parser.add_argument(
        "--kill-every-s", type=float, nargs=2, default=d.kill_every_s, metavar=("MIN", "MAX")
    )
    parser.add_argument("--feed-timeout-s", type=float, default=d.feed_timeout_s)
    parser.add_argument(
        "--drain-timeout-s",
        type=float,
        default=d.drain_timeout_s,
        help="how long the drain after the feed may go without progress (a flooded room's "
        "backlog of results goes out at a group's 20 messages a minute)",
    )
    parser.add_argument("--pg-outage-s", type=float, default=d.pg_outage_s)
    parser.add_argument(
        "--backlog",
        type=int,
        default=d.backlog,
        help="guesses of the backlog phase: typed while no bot runs, drained by a bot "
        "process SIGKILLed half-way (0: no such phase)",
    )
    parser.add_argument(
        "--stuck-chats",
        type=int,
        default=d.stuck_chats,
        help="rooms guessing beside one whose round is locked (0: no stuck phase)",
    )
    parser.add_argument("--stuck-hold-s", type=float, default=d.stuck_hold_s)
    parser.add_argument(
        "--outage",
        type=int,
        default=d.outage,
        help="guesses typed while Redis is down (0: no outage phase)",
    )
    parser.add_argument("--outage-down-s", type=float, default=d.outage_down_s)
    parser.add_argument(
        "--handover-chats",
        type=int,
        default=d.handover_chats,
        help="rooms whose parked /endround is handed over, per handover phase (0: none)",
    )
    parser.add_argument("--no-faults", action="store_true")
    parser.add_argument(
        "--ambiguous",
        choices=("repost", "assume_sent"),
        default=d.ambiguous,
        help="the workers' sender policy for a post whose fate is unknown",
    )
    parser.add_argument("--seed", type=int, default=d.seed)
    parser.add_argument("--keep-dir", action="store_true")
    parser.add_argument("--json", type=Path, default=None, help="write the report here")
    parser.add_argument(
        "--save", action="store_true", help=f"write the report to {SAVED}, the run kept"
    )
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    if args.save:
        if args.json is not None:
            parser.error("--save writes the kept run's report; --json names another file")
        args.json = ROOT / SAVED
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("httpx").setLevel(logging.WARNING)
    plan = SoakPlan(
        via=args.via,
        guesses=args.guesses,
        rooms=args.rooms,
        players=args.players,
        flood_players=args.flood_players,
        workers=args.workers,
        concurrency=args.concurrency,
        lease_ms=args.lease_ms,
        pg_outage_s=args.pg_outage_s,
        backlog=args.backlog,
        stuck_chats=args.stuck_chats,
        stuck_hold_s=args.stuck_hold_s,
        outage=args.outage,
        outage_down_s=args.outage_down_s,
        handover_chats=args.handover_chats,
        feed_timeout_s=args.feed_timeout_s,
        drain_timeout_s=args.drain_timeout_s,
        kill_every_s=(args.kill_every_s[0], args.kill_every_s[1]),
        faults=not args.no_faults,
        ambiguous=args.ambiguous,
        seed=args.seed,
        keep_dir=args.keep_dir,
    )

    def interrupted(signum: int, frame: object) -> None:
        # SIGTERM unwinds like Ctrl-C, so the private servers and workers are stopped.
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupted)
    report = asyncio.run(run_soak(plan))
    print_report(report)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2, default=str))
        print(f"report written to {args.json}")
    bad = {k: v for k, v in headline(report).items() if v}
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
