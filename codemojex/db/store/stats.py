"""Records: a room's leaderboard (all time, and this week's), a player's record in a room, a
user's over every room. Reads only, in the caller's read (`codemojex.db.reading`)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

from sqlalchemy import ColumnElement, and_, func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from codemojex.db.models import Guess, LeaderboardEntry, Player, Round
from codemojex.scoring import points_for
from codemojex.values.clock import utcnow


@dataclass(frozen=True, slots=True)
class LeaderRow:
    rank: int
    player_id: str
    tg_user_id: int
    display_name: str
    points: int
    wins: int
    guesses: int
    best_solve: int | None


@dataclass(frozen=True, slots=True)
class PlayerStats:
    player_id: str
    display_name: str
    points: int
    wins: int
    guesses: int
    best_solve: int | None
    rank: int | None  # None until the player has a leaderboard entry
    players: int  # how many players the room's leaderboard has


@dataclass(frozen=True, slots=True)
class GlobalStats:
    tg_user_id: int
    rooms: int
    points: int
    wins: int
    guesses: int
    best_solve: int | None


_ORDER: Final = (
    LeaderboardEntry.points.desc(),
    LeaderboardEntry.wins.desc(),
    LeaderboardEntry.guesses.asc(),
    LeaderboardEntry.player_id.asc(),
)


async def leaderboard(session: AsyncSession, room_id: str, limit: int = 10) -> list[LeaderRow]:
    """The room's best players: points, then wins (then fewer guesses), best first."""
    stmt = (
        select(LeaderboardEntry, Player)
        .join(Player, Player.id == LeaderboardEntry.player_id)
        .where(LeaderboardEntry.room_id == room_id)
        .order_by(*_ORDER)
        .limit(max(0, limit))
    )
    rows = (await session.execute(stmt)).all()
    return [
        LeaderRow(
            rank=i,
            player_id=player.id,
            tg_user_id=player.tg_user_id,
            display_name=player.display_name,
            points=entry.points,
            wins=entry.wins,
            guesses=entry.guesses,
            best_solve=entry.best_solve,
        )
        for i, (entry, player) in enumerate(rows, start=1)
    ]


def _ahead_of(entry: LeaderboardEntry) -> ColumnElement[bool]:
    lb = LeaderboardEntry
    return or_(
        lb.points > entry.points,
        and_(lb.points == entry.points, lb.wins > entry.wins),
        and_(lb.points == entry.points, lb.wins == entry.wins, lb.guesses < entry.guesses),
        and_(
            lb.points == entry.points,
            lb.wins == entry.wins,
            lb.guesses == entry.guesses,
            lb.player_id < entry.player_id,
        ),
    )


async def player_stats(session: AsyncSession, room_id: str, tg_user_id: int) -> PlayerStats | None:
    """A user's record in one room (None if they never played there)."""
    player = (
        await session.execute(
            select(Player).where(Player.room_id == room_id, Player.tg_user_id == tg_user_id)
        )
    ).scalar()
    if player is None:
        return None
    entry = await session.get(LeaderboardEntry, (room_id, player.id), populate_existing=True)
    total = (
        await session.execute(
            select(func.count())
            .select_from(LeaderboardEntry)
            .where(LeaderboardEntry.room_id == room_id)
        )
    ).scalar_one()
    rank: int | None = None
    if entry is not None:
        ahead = (
            await session.execute(
                select(func.count())
                .select_from(LeaderboardEntry)
                .where(LeaderboardEntry.room_id == room_id, _ahead_of(entry))
            )
        ).scalar_one()
        rank = int(ahead) + 1
    return PlayerStats(
        player_id=player.id,
        display_name=player.display_name,
        points=entry.points if entry else 0,
        wins=entry.wins if entry else 0,
        guesses=entry.guesses if entry else 0,
        best_solve=entry.best_solve if entry else None,
        rank=rank,
        players=int(total),
    )


async def global_stats(session: AsyncSession, tg_user_id: int) -> GlobalStats:
    """A user's record summed over every room they played in (joined by Telegram user id)."""
    lb = LeaderboardEntry
    row = (
        await session.execute(
            select(
                func.count(lb.room_id),
                func.coalesce(func.sum(lb.points), 0),
                func.coalesce(func.sum(lb.wins), 0),
                func.coalesce(func.sum(lb.guesses), 0),
                func.min(lb.best_solve),
            )
            .join(Player, Player.id == lb.player_id)
            .where(Player.tg_user_id == tg_user_id)
        )
    ).one()
    rooms, points, wins, guesses, best = row
    return GlobalStats(
        tg_user_id=tg_user_id,
        rooms=int(rooms),
        points=int(points),
        wins=int(wins),
        guesses=int(guesses),
        best_solve=None if best is None else int(best),
    )


# --- this week's board ---------------------------------------------------------------------------

WEEK: Final = timedelta(days=7)


def week_start(now: datetime) -> datetime:
    """Monday 00:00 UTC of the week `now` is in: where this week's board begins."""
    day = now.astimezone(UTC)
    return datetime(day.year, day.month, day.day, tzinfo=UTC) - timedelta(days=day.weekday())


@dataclass(frozen=True, slots=True)
class WeekRow:
    rank: int
    player_id: str
    display_name: str
    points: int
    wins: int
    best_solve: int  # fewest attempts of the week's wins


async def weekly_board(
    session: AsyncSession, room_id: str, *, now: datetime | None = None, limit: int = 10
) -> list[WeekRow]:
    """The room's best players of this week (since Monday 00:00 UTC): the points of the rounds
    each won since then, best first (points, then wins, then best solve).

    Read from what a win already stored (the round's winning guess and its attempt number, the
    points being `points_for` of it), through the partial index of won rounds: nothing is
    written for it, and the cost is one row per round won this week."""
    since = week_start(now or utcnow())
    won = (
        await session.execute(
            select(Guess.player_id, Guess.attempt_no, func.count())
            .select_from(Round)
            .join(Guess, Guess.id == Round.winning_guess_id)
            .where(
                Round.room_id == room_id,
                Round.winning_guess_id.is_not(None),  # the index's predicate
                Round.ended_at >= since,
                Round.ended_at < since + WEEK,
            )
            .group_by(Guess.player_id, Guess.attempt_no)
        )
    ).all()
    points: dict[str, int] = defaultdict(int)
    wins: dict[str, int] = defaultdict(int)
    best: dict[str, int] = {}
    for player_id, attempt_no, count in won:
        if attempt_no is None:  # a winning guess is always scored; a late one has no number
            continue
        points[player_id] += points_for(attempt_no) * count
        wins[player_id] += count
        best[player_id] = min(attempt_no, best.get(player_id, attempt_no))
    ranked = sorted(points, key=lambda p: (-points[p], -wins[p], best[p], p))[: max(0, limit)]
    names: dict[str, str] = {}
    if ranked:
        stmt = select(Player.id, Player.display_name).where(Player.id.in_(ranked))
        names = {pid: name for pid, name in (await session.execute(stmt)).all()}
    return [
        WeekRow(
            rank=i,
            player_id=p,
            display_name=names.get(p, ""),
            points=points[p],
            wins=wins[p],
            best_solve=best[p],
        )
        for i, p in enumerate(ranked, start=1)
    ]
