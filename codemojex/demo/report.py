"""The demo's books and closing summary: what the database recorded, each room's queue as the
lanes saw it, and the table that accounts for every guess sent."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.table import Table
from sqlalchemy import func, select

from codemojex.db import Guess, Outbox, Player, Room, Round, reading
from codemojex.demo.people import SimRoom
from codemojex.runtime import Runtime
from codemojex.standin import StandIn
from codemojex.worker.service import WorkerStats


async def read_books(runtime: Runtime, rooms: Sequence[SimRoom]) -> dict[int, tuple[int, int]]:
    """chat id -> (guesses recorded, rounds won), from the database; and each room's
    sent-to-scored delays (what the lanes decide, before Telegram's posting pace)."""
    async with reading(runtime.sessionmaker) as session:
        guesses = await session.execute(
            select(Room.chat_id, func.count(Guess.id))
            .join(Player, Player.room_id == Room.id)
            .join(Guess, Guess.player_id == Player.id)
            .group_by(Room.chat_id)
        )
        wins = await session.execute(
            select(Room.chat_id, func.count(Round.id))
            .join(Round, Round.room_id == Room.id)
            .where(Round.winner_player_id.is_not(None))
            .group_by(Room.chat_id)
        )
        scored_at = await session.execute(
            select(Outbox.chat_id, Outbox.reply_to_message_id, Guess.scored_at).join(
                Guess, Guess.id == Outbox.guess_id
            )
        )
    by_chat = {room.chat_id: room for room in rooms}
    for chat_id, message_id, when in scored_at.all():
        room = by_chat.get(int(chat_id))
        if room is not None and message_id in room.sent_wall:
            room.scoring.append(when.timestamp() - room.sent_wall[message_id])
    won = {int(chat): int(n) for chat, n in wins.all()}
    return {int(chat): (int(n), won.get(int(chat), 0)) for chat, n in guesses.all()}


async def sample_queues(runtime: Runtime, rooms: Sequence[SimRoom]) -> None:
    """Note each room's queue (pending + in flight) from a lanes snapshot, keeping the peak."""
    if any(room.room_id is None for room in rooms):
        async with reading(runtime.sessionmaker) as session:
            rows = (await session.execute(select(Room.chat_id, Room.id))).all()
        found = {int(chat_id): room_id for chat_id, room_id in rows}
        for room in rooms:
            room.room_id = found.get(room.chat_id, room.room_id)
    lanes_rooms = (await runtime.lanes.snapshot())["rooms"]
    for room in rooms:
        state = lanes_rooms.get(room.room_id)
        if state is not None:
            queued = int(state["pending"]) + int(state["in_flight"])
            room.peak_queue = max(room.peak_queue, queued)


async def quiet_results_due(runtime: Runtime, rooms: Sequence[SimRoom]) -> int:
    """Quiet rooms' guesses still queued, scored but not yet posted, or waiting for a retry."""
    quiet = [room for room in rooms if not room.flood]
    snapshot = await runtime.lanes.snapshot()
    queued = sum(
        int(state["pending"]) + int(state["in_flight"])
        for room_id, state in snapshot["rooms"].items()
        if room_id in {room.room_id for room in quiet}
    )
    async with reading(runtime.sessionmaker) as session:
        unsent = await session.scalar(
            select(func.count(Outbox.id)).where(
                Outbox.chat_id.in_([room.chat_id for room in quiet]), Outbox.sent_at.is_(None)
            )
        )
    return queued + int(unsent or 0) + int(snapshot["delayed"])


def _ms(values: Sequence[float], q: float) -> str:
    if not values:
        return "-"
    ordered = sorted(values)
    return f"{ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000:,.0f}"


@dataclass
class Report:
    """The demo's closing summary: every guess sent is accounted for."""

    rooms: Sequence[SimRoom]
    books: dict[int, tuple[int, int]]  # chat id -> (guesses recorded, rounds won)
    stats: WorkerStats
    outcomes: Counter[str]  # the bot's guesses.Outcome values
    backlog: int  # guesses still queued when the worker stopped
    ceiling: int

    @property
    def total_scored(self) -> int:
        return sum(n for n, _ in self.books.values())

    @property
    def unaccounted(self) -> int:
        """Guesses the bot took that were neither scored nor left queued (must be 0)."""
        return self.outcomes["enqueued"] - self.total_scored - self.backlog

    def print(self, console: Console, faults: list[str], standin: StandIn, elapsed: float) -> None:
        self._table(console)
        rooms, counters = self.rooms, self.stats.as_dict()
        console.print(
            f"{sum(w for _, w in self.books.values())} rounds won and {self.total_scored} "
            f"guesses scored in {elapsed:.0f} s; {counters.get('sent_messages', 0)} messages "
            f"posted, {counters.get('sent_coalesced_rows', 0)} results folded into "
            f"{counters.get('sent_coalesced_messages', 0)} combined messages."
        )
        self._accounts(console)
        quiet = [w for room in rooms if not room.flood for w in room.scoring]
        flood_rooms = [room for room in rooms if room.flood]
        flood = [w for room in flood_rooms for w in room.scoring]
        peak = max((room.peak_queue for room in flood_rooms), default=0)
        if peak > self.ceiling:
            console.print(
                f"The flood room's queue peaked at {peak} guesses, held in its own lanes with "
                f"at most {self.ceiling} in flight: its guesses waited {_ms(flood, 0.5)} ms "
                f"(median) to be scored, quiet rooms' {_ms(quiet, 0.5)} ms "
                f"(p95 {_ms(quiet, 0.95)} ms)."
            )
        else:
            console.print(
                f"The flood never outran the workers (its queue peaked at {peak}), so no room "
                f"had to wait: quiet rooms' guesses were scored in {_ms(quiet, 0.5)} ms "
                f"(median), the flood's in {_ms(flood, 0.5)} ms."
            )
        console.print(
            "'Posted' adds Telegram's pace (about 20 messages a minute per group), which the "
            "sender keeps."
        )
        verdict = "all hold" if not faults else "; ".join(faults)
        console.print(
            f"Telegram flood limits broken: {standin.rate_violations}. "
            f"Lanes invariants after the run: {verdict}."
        )

    def _table(self, console: Console) -> None:
        table = Table(title="What each room saw (times in ms)", title_justify="left")
        table.add_column("room")
        for column in ("players", "rounds won", "guesses sent", "scored", "peak queue"):
            table.add_column(column, justify="right")
        for column in ("slow-downs", "scored p50", "scored p95", "posted p50", "posted p95"):
            table.add_column(column, justify="right")
        for room in self.rooms:
            recorded, won = self.books.get(room.chat_id, (0, 0))
            table.add_row(
                room.title,
                str(len(room.players)),
                str(won),
                str(room.sent),
                str(recorded),
                str(room.peak_queue),
                str(room.slow_downs),
                _ms(room.scoring, 0.5),
                _ms(room.scoring, 0.95),
                _ms(room.waits, 0.5),
                _ms(room.waits, 0.95),
            )
        console.print(table)

    def _accounts(self, console: Console) -> None:
        sent = sum(room.sent for room in self.rooms)
        taken, outcomes = self.outcomes["enqueued"], self.outcomes
        parts = [f"Of {sent} guesses sent, the bot took {taken}"]
        if outcomes["no_round"]:
            parts.append(
                f"{outcomes['no_round']} came while no round was running (sent after a win, "
                "before its announcement reached the room) and were not taken"
            )
        if outcomes["flood"]:
            notices = sum(room.slow_downs for room in self.rooms)
            parts.append(
                f"{outcomes['flood']} were refused because the sender's lane was full "
                f'({notices} "slow down" notices, one per player per flood)'
            )
        for other in ("invalid", "banned"):
            if outcomes[other]:
                parts.append(f"{outcomes[other]} were refused as {other}")
        unread = sent - sum(outcomes.values())
        if unread > 0:
            parts.append(f"{unread} had not reached the bot when the demo stopped")
        console.print("; ".join(parts) + ".")
        if self.unaccounted:
            console.print(
                f"[bold red]{self.unaccounted} guesses the bot took were neither scored nor "
                "left queued.[/]"
            )
        elif self.backlog:
            console.print(
                f"Every guess taken was scored, except {self.backlog} of the flood's still "
                "queued when the demo stopped its worker (kept in the lanes, not lost)."
            )
        else:
            console.print("Every guess taken was scored; nothing was left queued.")


def queued_jobs(snapshot: dict[str, Any]) -> int:
    """Guesses still pending, in flight or waiting for a retry, from a lanes snapshot."""
    pending = sum(int(room["pending"]) for room in snapshot["rooms"].values())
    return pending + int(snapshot["active"]) + int(snapshot["delayed"])
