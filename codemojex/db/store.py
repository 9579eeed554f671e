"""Use-cases of the game over an AsyncSession.

Every function here commits (or rolls back) its own transaction, readers included: on SQLite
every transaction holds the write lock (BEGIN IMMEDIATE, see `engine.py`), so none may be left
open. Objects returned stay readable after the commit (the session maker sets
expire_on_commit=False).

Concurrency, in short: a guess locks its round row (SELECT … FOR UPDATE on Postgres; SQLite
serialises writers) before it looks anything up, so the guesses of one round are recorded one
after another and the first all-exact guess is the only winner; the guess id (the lane job id)
is the primary key, so a re-delivered job finds its own row and changes nothing. One open round
per room is a partial unique index. The outbox is claimed with a lease (FOR UPDATE SKIP LOCKED on
Postgres) so that two senders never post the same row, and `sent_at` is only ever set once.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Final, TypeVar

from sqlalchemy import (
    ColumnElement,
    Select,
    and_,
    case,
    delete,
    func,
    insert,
    or_,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from codemojex import scoring, texts
from codemojex.db.models import (
    AuditLog,
    Ban,
    Guess,
    LeaderboardEntry,
    Outbox,
    Player,
    Room,
    Round,
    utcnow,
)

# Outbox kinds.
KIND_ROUND: Final = "round"  # a round started: palette and rules
KIND_RESULT: Final = "result"  # a scored guess: "🍎🍌🍇🍒 → 🟢🟢🟡⚫  (attempt 3)"
KIND_WIN: Final = "win"  # the winner and the secret
KIND_LATE: Final = "late"  # a guess for a round that had already ended
KIND_REVEAL: Final = "reveal"  # a round ended without a winner: the secret
KIND_NOTICE: Final = "notice"  # anything else a caller enqueues with `enqueue_message`

# Round end reasons.
SOLVED: Final = "solved"
TIMEOUT: Final = "timeout"
ENDROUND: Final = "endround"

MIN_CEILING: Final = 1
MAX_CEILING: Final = 1000
MIN_ROUND_TIMEOUT_S: Final = 30
MAX_ROUND_TIMEOUT_S: Final = 7 * 24 * 3600


class StoreError(Exception):
    """Base of the store's refusals."""


class UnknownRoom(StoreError, LookupError):
    pass


class UnknownRound(StoreError, LookupError):
    pass


class UnknownPlayer(StoreError, LookupError):
    """No such player, or the player is not in the round's room."""


class GuessMismatch(StoreError, ValueError):
    """The emojis are not `length` emojis of the round's palette (the bot validates first, so
    this is a stale or forged job: nothing is written, the worker should drop it)."""


class InvalidCeiling(StoreError, ValueError):
    """A ceiling or round timeout out of range; str(exc) is the admin-facing reason."""


class RoundAlreadyOpen(StoreError):
    def __init__(self, room_id: str, round_id: int | None) -> None:
        super().__init__(f"room {room_id} already has an open round ({round_id})")
        self.room_id = room_id
        self.round_id = round_id


@dataclass(frozen=True, slots=True)
class GuessResult:
    """What `record_guess` decided (or, with duplicate=True, had decided the first time).

    exact/misplaced/attempt_no are None for a late guess (the round had ended before it was
    scored: it earns nothing and is answered "round already solved/ended") and for a banned one.
    round_closed: the round is closed now (this guess won it, or it was already over).
    banned: the player is banned in the room; nothing was written and nothing is answered.
    points: what this guess booked (only a win books points).
    chat_id: the chat it was answered in (None when nothing was answered).
    """

    duplicate: bool
    exact: int | None
    misplaced: int | None
    attempt_no: int | None
    won: bool
    round_closed: bool
    late: bool = False
    banned: bool = False
    points: int = 0
    chat_id: int | None = field(default=None, compare=False)  # where, not what


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


# --- texts of outbox rows ---------------------------------------------------------------------


def _text_late(emojis: Sequence[str], end_reason: str | None) -> str:
    return texts.already_solved(emojis) if end_reason == SOLVED else texts.already_over(emojis)


def _text_reveal(rnd: Round, reason: str) -> str:
    if reason == TIMEOUT:
        timeout_s = round((rnd.expires_at - rnd.started_at).total_seconds())
        return texts.timed_out(rnd.secret, timeout_s)
    return texts.ended_by_admin(rnd.secret)


# --- helpers ----------------------------------------------------------------------------------


def _dialect(session: AsyncSession) -> str:
    return session.get_bind().dialect.name


async def _locked_round(session: AsyncSession, round_id: int) -> Round | None:
    # FOR NO KEY UPDATE: exclusive among guesses and closers of the round, yet rows that only
    # reference the round (outbox, guesses: FOR KEY SHARE) are not held up by it.
    stmt = (
        select(Round)
        .where(Round.id == round_id)
        .with_for_update(key_share=True)
        .execution_options(populate_existing=True)
    )
    return (await session.execute(stmt)).scalar_one_or_none()


async def _player_banned(session: AsyncSession, room_id: str, player_id: str) -> bool:
    stmt = select(Ban.player_id).where(Ban.room_id == room_id, Ban.player_id == player_id)
    return (await session.execute(stmt)).first() is not None


def _stored_result(guess: Guess, rnd: Round) -> GuessResult:
    won = rnd.winning_guess_id == guess.id
    return GuessResult(
        duplicate=True,
        exact=guess.exact,
        misplaced=guess.misplaced,
        attempt_no=guess.attempt_no,
        won=won,
        round_closed=rnd.ended_at is not None,
        late=guess.late,
        points=scoring.points_for(guess.attempt_no) if won and guess.attempt_no else 0,
    )


async def _bump_leaderboard(
    session: AsyncSession, tallies: Mapping[tuple[str, str], _Tally]
) -> None:
    """Add each player's scored guesses (and wins) to their record, creating it if needed: one
    statement for every player of the batch, in key order (rows locked in a stable order)."""
    upsert = pg_insert if _dialect(session) == "postgresql" else sqlite_insert
    rows = [
        {
            "room_id": room_id,
            "player_id": player_id,
            "points": tally.points,
            "wins": tally.wins,
            "guesses": tally.guesses,
            "best_solve": tally.best_solve,
        }
        for (room_id, player_id), tally in sorted(tallies.items())
    ]
    stmt = upsert(LeaderboardEntry)
    table = LeaderboardEntry.__table__.c
    new = stmt.excluded
    # The rows go as parameters (executemany, sent as one multi-row statement), not as
    # .values(): a statement with its rows inside is compiled anew on every call.
    await session.execute(
        stmt.on_conflict_do_update(
            index_elements=[table.room_id, table.player_id],
            set_={
                "points": table.points + new.points,
                "wins": table.wins + new.wins,
                "guesses": table.guesses + new.guesses,
                "best_solve": case(
                    (new.best_solve.is_(None), table.best_solve),
                    (table.best_solve.is_(None), new.best_solve),
                    (new.best_solve < table.best_solve, new.best_solve),
                    else_=table.best_solve,
                ),
            },
        ),
        rows,
        # one statement shape whether best_solve is set or not (not one group per shape)
        execution_options={"render_nulls": True},
    )


def _close(rnd: Round, now: datetime, reason: str) -> None:
    rnd.ended_at = now
    rnd.end_reason = reason


async def _room_chat(session: AsyncSession, room_id: str) -> int:
    chat_id = (await session.execute(select(Room.chat_id).where(Room.id == room_id))).scalar_one()
    return int(chat_id)


async def _close_with_reveal(session: AsyncSession, rnd: Round, now: datetime, reason: str) -> None:
    _close(rnd, now, reason)
    session.add(
        Outbox(
            chat_id=await _room_chat(session, rnd.room_id),
            text=_text_reveal(rnd, reason),
            kind=KIND_REVEAL,
            round_id=rnd.id,
            created_at=now,
        )
    )


# --- rooms and players ------------------------------------------------------------------------


async def ensure_room(
    session: AsyncSession,
    chat_id: int,
    title: str,
    *,
    default_ceiling: int,
    round_timeout_s: int,
) -> Room:
    """The room of a Telegram chat, created with the defaults on first sight (title kept fresh)."""
    stmt = select(Room).where(Room.chat_id == chat_id).execution_options(populate_existing=True)
    room = (await session.execute(stmt)).scalar_one_or_none()
    if room is None:
        room = Room(
            chat_id=chat_id,
            title=title[:255],
            length=scoring.DEFAULT_LENGTH,
            palette=None,
            palette_size=scoring.DEFAULT_PALETTE_SIZE,
            ceiling=default_ceiling,
            round_timeout_s=round_timeout_s,
        )
        try:
            # A savepoint: losing the race must not expire what the caller holds.
            async with session.begin_nested():
                session.add(room)
        except IntegrityError:
            # Created concurrently by another process: theirs is the room.
            room = (await session.execute(stmt)).scalar_one()
        await session.commit()
        return room
    if title and room.title != title[:255]:
        room.title = title[:255]
    await session.commit()
    return room


async def ensure_player(
    session: AsyncSession, room_id: str, tg_user_id: int, display_name: str
) -> Player:
    """The player of a Telegram user in a room, created on first sight (name kept fresh)."""
    stmt = (
        select(Player)
        .where(Player.room_id == room_id, Player.tg_user_id == tg_user_id)
        .execution_options(populate_existing=True)
    )
    player = (await session.execute(stmt)).scalar_one_or_none()
    name = display_name[:255]
    if player is None:
        player = Player(room_id=room_id, tg_user_id=tg_user_id, display_name=name)
        try:
            async with session.begin_nested():
                session.add(player)
        except IntegrityError:
            found = (await session.execute(stmt)).scalar_one_or_none()
            await session.commit()
            if found is None:  # not a race: the room does not exist
                raise UnknownRoom(room_id) from None
            return found
        await session.commit()
        return player
    if name and player.display_name != name:
        player.display_name = name
    await session.commit()
    return player


_Row = TypeVar("_Row")


async def _fresh_one(session: AsyncSession, stmt: Select[_Row]) -> _Row | None:
    """One row read anew from the database (not the session's cached copy); the read's
    transaction ends at once, since on SQLite an open one holds the write lock."""
    row = (await session.execute(stmt.execution_options(populate_existing=True))).scalar()
    await session.commit()
    return row


async def get_room(session: AsyncSession, room_id: str) -> Room | None:
    return await _fresh_one(session, select(Room).where(Room.id == room_id))


async def room_by_chat(session: AsyncSession, chat_id: int) -> Room | None:
    return await _fresh_one(session, select(Room).where(Room.chat_id == chat_id))


async def get_player(session: AsyncSession, player_id: str) -> Player | None:
    return await _fresh_one(session, select(Player).where(Player.id == player_id))


async def update_room_settings(
    session: AsyncSession,
    room_id: str,
    *,
    length: int | str | None = None,
    palette: str | Sequence[str] | None = None,
    repeats: bool | str | None = None,
    ceiling: int | None = None,
    round_timeout_s: int | None = None,
    random_palette: bool = False,
) -> Room:
    """Change a room's settings for its next rounds (the open round keeps its own).

    Everything is validated before anything is written: length 3..6, palettes of 4..10
    distinct emojis and repeats (a bool, or on/off as typed) by codemojex.scoring (raising
    `scoring.InvalidSettings`), ceiling 1..1000 and round timeout 30 s..7 days here (raising
    `InvalidCeiling`). `random_palette=True` goes back to a fresh random palette per round.
    The settings as they would be afterwards must be drawable: with repeats off, the palette
    (or the size of the palette drawn per round) must be at least the length, whichever of them
    is being changed; otherwise `scoring.InvalidSettings` (kind "repeats_palette") and nothing
    changes.
    """
    new_length = scoring.parse_length(length) if length is not None else None
    new_repeats = scoring.parse_repeats(repeats) if repeats is not None else None
    new_palette: tuple[str, ...] | None = None
    if palette is not None:
        text = palette if isinstance(palette, str) else " ".join(palette)
        new_palette = scoring.parse_palette(text)
    if ceiling is not None and not MIN_CEILING <= ceiling <= MAX_CEILING:
        raise InvalidCeiling(f"The limit must be from {MIN_CEILING} to {MAX_CEILING}.")
    if round_timeout_s is not None and not (
        MIN_ROUND_TIMEOUT_S <= round_timeout_s <= MAX_ROUND_TIMEOUT_S
    ):
        raise InvalidCeiling(
            f"The round timeout must be from {MIN_ROUND_TIMEOUT_S} to "
            f"{MAX_ROUND_TIMEOUT_S} seconds."
        )
    room = (
        await session.execute(
            select(Room)
            .where(Room.id == room_id)
            .with_for_update(key_share=True)
            .execution_options(populate_existing=True)
        )
    ).scalar_one_or_none()
    if room is None:
        await session.commit()
        raise UnknownRoom(room_id)
    if random_palette or any(v is not None for v in (new_length, new_palette, new_repeats)):
        if new_palette is not None:
            palette_size = len(new_palette)
        elif random_palette or room.palette is None:
            palette_size = room.palette_size
        else:
            palette_size = len(room.palette_emojis or ())
        try:
            scoring.check_repeats(
                new_length if new_length is not None else room.length,
                palette_size,
                new_repeats if new_repeats is not None else room.repeats,
            )
        except scoring.InvalidSettings:
            await session.commit()  # nothing was written: end the transaction, free the row
            raise
    if new_length is not None:
        room.length = new_length
    if new_repeats is not None:
        room.repeats = new_repeats
    if random_palette:
        room.palette = None
    if new_palette is not None:
        room.palette = "".join(new_palette)
    if ceiling is not None:
        room.ceiling = ceiling
    if round_timeout_s is not None:
        room.round_timeout_s = round_timeout_s
    await session.commit()
    return room


# --- rounds -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GuessContext:
    """What the bot needs to accept a guess, read at once."""

    room: Room
    open_round: Round | None
    player: Player | None  # None until the user's first guess in the room
    banned: bool


async def guess_context(
    session: AsyncSession, chat_id: int, tg_user_id: int
) -> GuessContext | None:
    """The chat's room (None on first sight), its open round, the user's player there and
    whether they are banned in it: one query, where the separate use-cases take four
    transactions. Every guess a player types pays for this, so it is kept to one round trip."""
    stmt = (
        select(Room, Round, Player, Ban.player_id)
        .outerjoin(Round, and_(Round.room_id == Room.id, Round.ended_at.is_(None)))
        .outerjoin(Player, and_(Player.room_id == Room.id, Player.tg_user_id == tg_user_id))
        .outerjoin(Ban, and_(Ban.room_id == Room.id, Ban.player_id == Player.id))
        .where(Room.chat_id == chat_id)
        .execution_options(populate_existing=True)
    )
    row = (await session.execute(stmt)).first()
    await session.commit()
    if row is None:
        return None
    room, rnd, player, banned_id = row
    return GuessContext(room=room, open_round=rnd, player=player, banned=banned_id is not None)


async def open_round(session: AsyncSession, room_id: str) -> Round | None:
    stmt = (
        select(Round)
        .where(Round.room_id == room_id, Round.ended_at.is_(None))
        .execution_options(populate_existing=True)
    )
    rnd = (await session.execute(stmt)).scalar_one_or_none()
    await session.commit()
    return rnd


async def get_round(session: AsyncSession, round_id: int) -> Round | None:
    rnd = (
        await session.execute(
            select(Round).where(Round.id == round_id).execution_options(populate_existing=True)
        )
    ).scalar()
    await session.commit()
    return rnd


async def start_round(
    session: AsyncSession, room_id: str, rng: random.Random, *, now: datetime | None = None
) -> Round:
    """Open a round with a secret drawn by `rng` under the room's settings (length, palette,
    repeats: the round keeps them), and queue its announcement (palette and rules). Raises
    `RoundAlreadyOpen` when the room has one: the partial unique index decides, so two
    concurrent calls open exactly one round."""
    now = now or utcnow()
    try:
        room = (
            await session.execute(
                select(Room).where(Room.id == room_id).execution_options(populate_existing=True)
            )
        ).scalar_one_or_none()
        if room is None:
            raise UnknownRoom(room_id)
        existing = await _open_round_id(session, room_id)
        if existing is not None:
            raise RoundAlreadyOpen(room_id, existing)
        palette = room.palette_emojis or scoring.draw_palette(rng, room.palette_size)
        secret = scoring.draw_secret(rng, palette, room.length, repeats=room.repeats)
        rnd = Round(
            room_id=room.id,
            secret="".join(secret),
            palette="".join(palette),
            length=room.length,
            repeats=room.repeats,
            started_at=now,
            expires_at=now + timedelta(seconds=room.round_timeout_s),
        )
        try:
            # A savepoint, so that losing the race leaves the caller's objects alone.
            async with session.begin_nested():
                session.add(rnd)
        except IntegrityError:
            # `from None`: the failed INSERT's parameters (the secret) stay out of tracebacks.
            raise RoundAlreadyOpen(room_id, await _open_round_id(session, room_id)) from None
        session.add(
            Outbox(
                chat_id=room.chat_id,
                text=texts.round_started(
                    palette, room.length, room.round_timeout_s, repeats=room.repeats
                ),
                kind=KIND_ROUND,
                round_id=rnd.id,
                created_at=now,
            )
        )
        await session.commit()
        return rnd
    except StoreError:
        await session.commit()  # nothing was written: end the read transaction
        raise
    except BaseException:
        await session.rollback()
        raise


async def _open_round_id(session: AsyncSession, room_id: str) -> int | None:
    stmt = select(Round.id).where(Round.room_id == room_id, Round.ended_at.is_(None))
    return (await session.execute(stmt)).scalar_one_or_none()


async def close_round(
    session: AsyncSession, round_id: int, reason: str, *, now: datetime | None = None
) -> Round | None:
    """End a round without a winner (reason "timeout" or "endround") and queue the reveal.

    Returns the round when this call closed it; None when it was already closed (no second
    reveal) or does not exist."""
    if not reason or len(reason) > 16:
        raise ValueError(f"bad end reason {reason!r}")
    now = now or utcnow()
    try:
        rnd = await _locked_round(session, round_id)
        if rnd is None or rnd.ended_at is not None:
            await session.commit()
            return None
        await _close_with_reveal(session, rnd, now, reason)
        await session.commit()
        return rnd
    except BaseException:
        await session.rollback()
        raise


async def expire_rounds(session: AsyncSession, now: datetime) -> list[Round]:
    """Close every open round whose timeout (started_at + the room's round_timeout_s, stored as
    expires_at) has passed, queueing a reveal for each. Idempotent: a closed round is skipped."""
    due_stmt = (
        select(Round.id)
        .where(Round.ended_at.is_(None), Round.expires_at <= now)
        .order_by(Round.id)  # one lock order for every caller
    )
    try:
        due = list((await session.execute(due_stmt)).scalars())
        closed: list[Round] = []
        for round_id in due:
            rnd = await _locked_round(session, round_id)
            if rnd is None or rnd.ended_at is not None or rnd.expires_at > now:
                continue
            await _close_with_reveal(session, rnd, now, TIMEOUT)
            closed.append(rnd)
        await session.commit()
        return closed
    except BaseException:
        await session.rollback()
        raise


# --- guesses ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GuessIn:
    """One guess to record. `chat_id` None: answer in the room's chat. `room_id`, when given,
    is the room the job came from: a round of another room refuses the guess (a stale or
    forged job) with UnknownRound."""

    guess_id: str
    round_id: int
    player_id: str
    emojis: tuple[str, ...]
    chat_id: int | None
    reply_to: int | None
    room_id: str | None = None


async def record_guess(
    session: AsyncSession,
    *,
    guess_id: str,
    round_id: int,
    player_id: str,
    emojis: Sequence[str],
    chat_id: int,
    reply_to: int | None,
    now: datetime | None = None,
) -> GuessResult:
    """Score and record one guess in ONE transaction, with its outbox rows.

    Idempotent by `guess_id` (the lane job id): recording it again changes nothing and returns
    duplicate=True with the stored result. The round row is locked first, so concurrent guesses
    of a round are recorded one at a time: the first all-exact one closes the round (winner,
    winning guess, end_reason "solved") and books points_for(attempt_no), a win and the best
    solve; every scored guess adds one to the player's guesses. attempt_no = the player's scored
    guesses in the round + 1. A guess for a closed round is recorded as late (no score, no
    points, not counted) and answered "round already solved/over", once. A banned player's guess
    writes nothing. Raises UnknownRound, UnknownPlayer, GuessMismatch (nothing written).
    """
    item = GuessIn(guess_id, round_id, player_id, tuple(emojis), chat_id, reply_to)
    [result] = await record_guesses(session, [item], now=now)
    if isinstance(result, StoreError):
        raise result
    return result


async def record_guesses(
    session: AsyncSession, items: Sequence[GuessIn], *, now: datetime | None = None
) -> list[GuessResult | StoreError]:
    """`record_guess` for many guesses in ONE transaction: one result per item, in order;
    a refused item (UnknownRound, UnknownPlayer, GuessMismatch) gets its refusal in its place
    and writes nothing, the others are recorded.

    Items are decided in the order given (give a player's guesses in the order they were sent).
    The same guess id twice in `items` is recorded once (the second gets duplicate=True). The
    statements are few and do not grow with the number of items (one lock, a few lookups, one
    insert per table), which is what lets the worker record a whole pool's batches at once.
    """
    if not items:
        return []
    now = now or utcnow()
    for attempt in (1, 2):
        try:
            results = await _record_guesses(session, items, now)
            await session.commit()
            return results
        except IntegrityError:
            # A copy of one of these jobs, delivered twice at once, committed first; its round
            # lock has been released, so the second go finds it and reports a duplicate.
            await session.rollback()
            if attempt == 2:
                raise
        except BaseException:
            await session.rollback()
            raise
    raise AssertionError("unreachable")


@dataclass(slots=True)
class _Tally:
    """One player's leaderboard change within a batch."""

    points: int = 0
    wins: int = 0
    guesses: int = 0
    best_solve: int | None = None


async def _record_guesses(
    session: AsyncSession, items: Sequence[GuessIn], now: datetime
) -> list[GuessResult | StoreError]:
    round_ids = sorted({item.round_id for item in items})
    player_ids = sorted({item.player_id for item in items})
    guess_ids = sorted({item.guess_id for item in items})
    # Locked in id order, so two workers recording overlapping rounds never deadlock. After the
    # lock, copies of these jobs recorded meanwhile are visible.
    locked = (
        await session.execute(
            select(Round, Room.chat_id)
            .join(Room, Room.id == Round.room_id)
            .where(Round.id.in_(round_ids))
            .order_by(Round.id)
            .with_for_update(of=Round, key_share=True)
            .execution_options(populate_existing=True)
        )
    ).all()
    rounds = {rnd.id: rnd for rnd, _chat in locked}
    room_chats = {rnd.id: int(chat) for rnd, chat in locked}
    existing = {
        guess.id: guess
        for guess in (
            await session.execute(
                select(Guess)
                .where(Guess.id.in_(guess_ids))
                .execution_options(populate_existing=True)
            )
        ).scalars()
    }
    players = {
        player.id: player
        for player in (
            await session.execute(select(Player).where(Player.id.in_(player_ids)))
        ).scalars()
    }
    banned = {
        (room_id, player_id)
        for room_id, player_id in (
            await session.execute(
                select(Ban.room_id, Ban.player_id).where(Ban.player_id.in_(player_ids))
            )
        ).all()
    }
    scored_before: dict[tuple[int, str], int] = {
        (round_id, player_id): int(count)
        for round_id, player_id, count in (
            await session.execute(
                select(Guess.round_id, Guess.player_id, func.count(Guess.id))
                .where(
                    Guess.round_id.in_(round_ids),
                    Guess.player_id.in_(player_ids),
                    Guess.late.is_(False),
                )
                .group_by(Guess.round_id, Guess.player_id)
            )
        ).all()
    }

    results: list[GuessResult | StoreError] = []
    decided: dict[str, GuessResult] = {}
    guess_rows: list[dict[str, Any]] = []
    outbox_rows: list[dict[str, Any]] = []
    tallies: dict[tuple[str, str], _Tally] = {}
    for item in items:
        rnd = rounds.get(item.round_id)
        if rnd is None or (item.room_id is not None and item.room_id != rnd.room_id):
            results.append(UnknownRound(item.round_id))
            continue
        if item.guess_id in decided:
            results.append(_as_duplicate(decided[item.guess_id]))
            continue
        stored = existing.get(item.guess_id)
        if stored is not None:
            results.append(_stored_result(stored, rounds.get(stored.round_id, rnd)))
            continue
        player = players.get(item.player_id)
        if player is None or player.room_id != rnd.room_id:
            results.append(UnknownPlayer(item.player_id))
            continue
        if (rnd.room_id, item.player_id) in banned:
            results.append(_BANNED)
            continue
        try:
            emojis = scoring.parse_guess("".join(item.emojis), rnd.palette_emojis, rnd.length)
        except scoring.InvalidGuess as exc:
            results.append(GuessMismatch(str(exc)))
            continue
        text = "".join(emojis)
        row = {"id": item.guess_id, "round_id": rnd.id, "player_id": item.player_id}
        chat_id = item.chat_id if item.chat_id is not None else room_chats[rnd.id]
        out = {
            "chat_id": chat_id,
            "reply_to_message_id": item.reply_to,
            "round_id": rnd.id,
            "guess_id": item.guess_id,
            "player_name": player.display_name,
            "created_at": now,
        }
        if rnd.ended_at is not None:
            guess_rows.append(row | {"text": text, "late": True, "scored_at": now})
            outbox_rows.append(
                out | {"text": _text_late(emojis, rnd.end_reason), "kind": KIND_LATE}
            )
            result = GuessResult(
                duplicate=False,
                exact=None,
                misplaced=None,
                attempt_no=None,
                won=False,
                round_closed=True,
                late=True,
                chat_id=chat_id,
            )
        else:
            fb = scoring.feedback(emojis, rnd.secret_emojis)
            key = (rnd.id, item.player_id)
            attempt_no = scored_before.get(key, 0) + 1
            scored_before[key] = attempt_no
            won = fb.exact == rnd.length
            points = scoring.points_for(attempt_no) if won else 0
            guess_rows.append(
                row
                | {
                    "text": text,
                    "exact": fb.exact,
                    "misplaced": fb.misplaced,
                    "attempt_no": attempt_no,
                    "late": False,
                    "scored_at": now,
                }
            )
            tally = tallies.setdefault((rnd.room_id, item.player_id), _Tally())
            tally.guesses += 1
            tally.points += points
            outbox_rows.append(
                out | {"text": texts.result_line(emojis, fb, attempt_no), "kind": KIND_RESULT}
            )
            if won:
                _close(rnd, now, SOLVED)
                rnd.winner_player_id = item.player_id
                rnd.winning_guess_id = item.guess_id
                tally.wins += 1
                tally.best_solve = min(attempt_no, tally.best_solve or attempt_no)
                win_text = texts.win(player.display_name, rnd.secret, attempt_no, points)
                outbox_rows.append(
                    out | {"text": win_text, "kind": KIND_WIN, "reply_to_message_id": None}
                )
            result = GuessResult(
                duplicate=False,
                exact=fb.exact,
                misplaced=fb.misplaced,
                attempt_no=attempt_no,
                won=won,
                round_closed=rnd.ended_at is not None,
                points=points,
                chat_id=chat_id,
            )
        decided[item.guess_id] = result
        results.append(result)

    if guess_rows:
        await session.execute(insert(Guess), guess_rows)
    if tallies:
        await _bump_leaderboard(session, tallies)
    if outbox_rows:
        await session.execute(insert(Outbox), outbox_rows)
    await session.flush()  # the closed rounds
    return results


_BANNED: Final = GuessResult(
    duplicate=False,
    exact=None,
    misplaced=None,
    attempt_no=None,
    won=False,
    round_closed=False,
    banned=True,
)


def _as_duplicate(result: GuessResult) -> GuessResult:
    # No chat: a duplicate is not answered again.
    return replace(result, duplicate=True, chat_id=None)


# --- bans and audit ---------------------------------------------------------------------------


async def ban(session: AsyncSession, room_id: str, player_id: str, actor: int | None) -> bool:
    """Ban a player in one room (only that room: the same Telegram user plays on elsewhere).
    True if newly banned, False if already banned. UnknownPlayer if not a player of the room."""
    player_room = (
        await session.execute(select(Player.room_id).where(Player.id == player_id))
    ).scalar()
    exists = await _player_banned(session, room_id, player_id)
    await session.commit()
    if player_room != room_id:
        raise UnknownPlayer(player_id)
    if exists:
        return False
    try:
        async with session.begin_nested():
            session.add(Ban(room_id=room_id, player_id=player_id, actor_tg_id=actor))
    except IntegrityError:
        banned = await _player_banned(session, room_id, player_id)
        await session.commit()
        if banned:  # banned concurrently
            return False
        raise UnknownPlayer(player_id) from None
    await session.commit()
    return True


async def unban(
    session: AsyncSession, room_id: str, player_id: str, actor: int | None = None
) -> bool:
    """Lift a ban. True if there was one. (`actor` is for symmetry; the bot audits.)"""
    result = await session.execute(
        delete(Ban).where(Ban.room_id == room_id, Ban.player_id == player_id)
    )
    await session.commit()
    return bool(getattr(result, "rowcount", 0))


async def is_banned(session: AsyncSession, room_id: str, tg_user_id: int) -> bool:
    stmt = (
        select(Ban.player_id)
        .join(Player, Player.id == Ban.player_id)
        .where(Ban.room_id == room_id, Player.tg_user_id == tg_user_id)
    )
    banned = (await session.execute(stmt)).first() is not None
    await session.commit()
    return banned


async def audit(
    session: AsyncSession,
    *,
    room_id: str | None,
    actor_tg_id: int | None,
    action: str,
    args: str | Mapping[str, Any] = "",
    allowed: bool,
) -> AuditLog:
    """Write one admin action (allowed or refused) to the audit log."""
    text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False, sort_keys=True)
    row = AuditLog(
        room_id=room_id, actor_tg_id=actor_tg_id, action=action[:32], args=text, allowed=allowed
    )
    session.add(row)
    await session.commit()
    return row


# --- leaderboard and stats --------------------------------------------------------------------

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
    await session.commit()
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
        await session.commit()
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
    await session.commit()
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
    await session.commit()
    rooms, points, wins, guesses, best = row
    return GlobalStats(
        tg_user_id=tg_user_id,
        rooms=int(rooms),
        points=int(points),
        wins=int(wins),
        guesses=int(guesses),
        best_solve=None if best is None else int(best),
    )


# --- outbox -----------------------------------------------------------------------------------


async def enqueue_message(
    session: AsyncSession,
    chat_id: int,
    text: str,
    *,
    reply_to: int | None = None,
    kind: str = KIND_NOTICE,
    round_id: int | None = None,
) -> Outbox:
    """Queue a message for the sender outside the use-cases above (its own transaction)."""
    row = Outbox(
        chat_id=chat_id, text=text, reply_to_message_id=reply_to, kind=kind[:16], round_id=round_id
    )
    session.add(row)
    await session.commit()
    return row


async def pending_outbox(
    session: AsyncSession, limit: int, chat_id: int | None = None
) -> list[Outbox]:
    """Unsent rows, oldest first (claimed or not: this is a view, `claim_outbox` is for senders)."""
    stmt = select(Outbox).where(Outbox.sent_at.is_(None))
    if chat_id is not None:
        stmt = stmt.where(Outbox.chat_id == chat_id)
    rows = list(
        (
            await session.execute(
                stmt.order_by(Outbox.id).limit(limit).execution_options(populate_existing=True)
            )
        ).scalars()
    )
    await session.commit()
    return rows


async def pending_chats(
    session: AsyncSession, *, limit: int = 100, now: datetime | None = None
) -> list[int]:
    """Chats with rows a sender could claim now (unsent, not under someone else's lease),
    the chat whose oldest such row is oldest first."""
    now = now or utcnow()
    stmt = (
        select(Outbox.chat_id)
        .where(
            Outbox.sent_at.is_(None),
            or_(Outbox.claimed_until.is_(None), Outbox.claimed_until <= now),
        )
        .group_by(Outbox.chat_id)
        .order_by(func.min(Outbox.id))
        .limit(limit)
    )
    chats = [int(c) for c in (await session.execute(stmt)).scalars()]
    await session.commit()
    return chats


async def claim_outbox(
    session: AsyncSession,
    limit: int,
    lease_s: float,
    owner: str,
    *,
    chat_id: int | None = None,
    now: datetime | None = None,
) -> list[Outbox]:
    """Take a lease of up to `limit` unsent rows (oldest first, optionally of one chat) for
    `owner`: nobody else is handed them until `now + lease_s`. Rows whose lease ran out (a
    sender died) are handed out again. On Postgres the rows are picked with FOR UPDATE SKIP
    LOCKED, so concurrent senders take disjoint rows without waiting on each other; SQLite
    serialises the whole claim. Post them, then `mark_sent`; on a failure, `release_outbox`.
    (A sender dying between Telegram's answer and `mark_sent` can still lead to one re-post
    after the lease: the books themselves never say "sent" twice.)"""
    now = now or utcnow()
    stmt = select(Outbox).where(
        Outbox.sent_at.is_(None),
        or_(Outbox.claimed_until.is_(None), Outbox.claimed_until <= now),
    )
    if chat_id is not None:
        stmt = stmt.where(Outbox.chat_id == chat_id)
    stmt = stmt.order_by(Outbox.id).limit(limit).with_for_update(skip_locked=True)
    try:
        rows = list(
            (await session.execute(stmt.execution_options(populate_existing=True))).scalars()
        )
        until = now + timedelta(seconds=lease_s)
        for row in rows:
            row.claimed_until = until
            row.claimed_by = owner[:64]
        await session.commit()
        return rows
    except BaseException:
        await session.rollback()
        raise


async def release_outbox(session: AsyncSession, ids: Iterable[int], owner: str) -> int:
    """Give back unsent rows claimed by `owner` (e.g. after a 429) so they can be claimed again."""
    id_list = list(ids)
    if not id_list:
        return 0
    result = await session.execute(
        update(Outbox)
        .where(Outbox.id.in_(id_list), Outbox.sent_at.is_(None), Outbox.claimed_by == owner[:64])
        .values(claimed_until=None, claimed_by=None)
    )
    await session.commit()
    return int(getattr(result, "rowcount", 0))


async def mark_sent(
    session: AsyncSession,
    ids: Iterable[int],
    message_id: int | None,
    *,
    now: datetime | None = None,
) -> int:
    """Record that rows were posted (as Telegram message `message_id`). Only rows not yet sent
    are touched, so a row is never "sent" twice in the books; returns how many were marked.
    A round announcement that is marked sent also becomes its round's `announce_message_id`."""
    id_list = list(ids)
    if not id_list:
        return 0
    now = now or utcnow()
    try:
        marked = (
            await session.execute(
                update(Outbox)
                .where(Outbox.id.in_(id_list), Outbox.sent_at.is_(None))
                .values(sent_at=now, sent_message_id=message_id, claimed_until=None)
                .returning(Outbox.id, Outbox.kind, Outbox.round_id)
                .execution_options(synchronize_session=False)
            )
        ).all()
        round_ids = [r.round_id for r in marked if r.kind == KIND_ROUND and r.round_id is not None]
        if round_ids and message_id is not None:
            await session.execute(
                update(Round)
                .where(Round.id.in_(round_ids), Round.announce_message_id.is_(None))
                .values(announce_message_id=message_id)
                .execution_options(synchronize_session=False)
            )
        await session.commit()
        return len(marked)
    except BaseException:
        await session.rollback()
        raise
