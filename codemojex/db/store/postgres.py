"""The Postgres backend (`backend.Backend`): fixed statements over arrays (`postgres_sql.py`).

Recording a batch costs a handful of statements whatever its size, which is what lets the worker
record every batch in hand at once (group commit): BEGIN, the lock, ONE write of the batch's
players (the bot writes no row per guess: `seats.py`), ONE lookup (recorded guesses, players,
bans and attempts so far, per guess, with LATERAL), ONE write (guess rows, leaderboard upserts,
closed rounds and outbox rows as data-modifying CTEs over arrays) and COMMIT; a daily round's
progress and a won round's keys_off row add theirs only when there are any. Opening a daily is
two statements: the look and the write.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date, datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy.ext.asyncio import AsyncConnection

from codemojex.db.models import DailyResult, Room, Round
from codemojex.db.store import daily, postgres_sql, rows
from codemojex.db.store.backend import Backend, NewDaily, Seen
from codemojex.db.store.lookups import RoomCard
from codemojex.db.store.outbox import announcements_posted, keys_off_written
from codemojex.db.store.seats import Seat, of_batch
from codemojex.scoring.rules import DEFAULT_LENGTH, DEFAULT_PALETTE_SIZE
from codemojex.values import ids
from codemojex.values.batch import Attempt, BatchState, Decision, PlayerState, StoredGuess
from codemojex.values.daily import PrivateChat
from codemojex.values.types import KIND_ROUND, ROUND_DAILY, Message

if TYPE_CHECKING:
    from codemojex.db.unit import Unit


class Postgres(Backend):
    async def mark_sent_many(
        self, tx: Unit, marks: Sequence[tuple[Sequence[int], int | None]], now: datetime
    ) -> int:
        """One statement for every post's rows (a sender posting hundreds a second would
        otherwise spend a statement per post on its books)."""
        rows_of = [row for row_ids, _ in marks for row in row_ids]
        if not rows_of:
            return 0
        message_ids = [message_id for row_ids, message_id in marks for _ in row_ids]
        params = {"ids": rows_of, "message_ids": message_ids, "now": now}
        marked = (await tx.conn.execute(postgres_sql.MARK_SENT_MANY, params)).all()
        # The announcements marked (few: one a round), by the message that carried them.
        announced: dict[int, list[int]] = {}
        for r in marked:
            if r.kind == KIND_ROUND and r.round_id is not None and r.sent_message_id is not None:
                announced.setdefault(int(r.sent_message_id), []).append(int(r.round_id))
        for message_id, round_ids in announced.items():
            await announcements_posted(tx, round_ids, message_id)
        return len(marked)

    async def load_batch(
        self,
        tx: Unit,
        attempts: Sequence[Attempt],
        seats: Mapping[str, Seat],
        now: datetime,
    ) -> tuple[BatchState, list[Attempt]]:
        conn = tx.conn
        round_ids = sorted({a.round_id for a in attempts})
        locked = (await conn.execute(postgres_sql.LOCK, {"round_ids": round_ids})).all()
        rounds = await self._round_states(conn, locked)
        await _seat(conn, of_batch(attempts, seats), now)
        found = await conn.execute(postgres_sql.LOOKUP, _lookup_params(attempts, seats))
        players: dict[str, PlayerState] = {}
        banned: set[tuple[str, str]] = set()
        scored_before: dict[tuple[int, str], int] = {}
        recorded: dict[str, StoredGuess] = {}
        player_of: dict[str, str] = {}
        for row in found:
            if row.g_round_id is not None:
                recorded[row.guess_id] = StoredGuess(
                    row.g_round_id, row.exact, row.misplaced, row.attempt_no, row.late
                )
            if row.p_room_id is not None:
                player_of[row.guess_id] = row.player_id
                players[row.player_id] = PlayerState(row.p_room_id, row.display_name)
                if row.banned:
                    banned.add((row.p_room_id, row.player_id))
            if row.scored:
                scored_before[(row.round_id, row.player_id)] = int(row.scored)
        state = BatchState(
            rounds=rounds,
            players=players,
            banned=frozenset(banned),
            scored_before=scored_before,
            recorded=recorded,
        )
        return state, [rows.as_player(a, player_of.get(a.guess_id)) for a in attempts]

    async def write_batch(self, tx: Unit, decision: Decision) -> None:
        conn = tx.conn
        if decision.new_guesses or decision.tallies or decision.closings or decision.messages:
            await conn.execute(postgres_sql.WRITE, _write_params(decision))
            # a won round's keys_off row learns its announcement's message id (a statement of
            # its own: it must see the row just inserted; only when a round closes)
            await keys_off_written(tx, decision.messages)
            await daily.write_progress(tx, decision.daily)

    async def look_daily(self, tx: Unit, chat: PrivateChat, day: date) -> Seen:
        conn = tx.conn
        params = {
            "day": day,
            "chat": chat.chat_id,
            "thread": chat.thread_id,
            "user": chat.tg_user_id,
        }
        r = (await conn.execute(postgres_sql.LOOK, params)).one()
        seats = zip(r.seat_users or [], r.seat_players or [], strict=True)
        return Seen(
            puzzle=rows.puzzle_from(r, "p"),
            room=None if r.room_id is None else _room(r, chat),
            player_id=r.player_id,
            player_name=r.player_name,
            result=None if r.r_round is None else _result(r, chat, day),
            record=rows.record_of(r.streak, r.best, r.last_cracked, r.histogram),
            open_round=None if r.o_id is None else _open_round(r),
            seats={int(user): str(player) for user, player in seats},
            banned=frozenset(int(u) for u in r.banned or ()),
            new_round_id=None if r.new_round is None else int(r.new_round),
            missed=rows.puzzle_from(r, "y"),
        )

    async def open_daily(self, tx: Unit, seen: Seen, new: NewDaily) -> RoomCard:
        conn = tx.conn
        if seen.new_round_id is None:  # pragma: no cover - the look reserves one
            raise RuntimeError("no round id reserved: the player has a daily today")
        await self._close_stale(conn, seen, new.now)
        round_id = seen.new_round_id
        room_id = seen.room.id if seen.room is not None else ids.mint(ids.ROOM)
        player_id = seen.player_id or ids.mint(ids.PLAYER)
        params = {
            "now": new.now,
            **_room_params(seen, new, room_id),
            **_player_params(seen, new.chat, player_id),
            **_round_params(new, round_id),
            **_post_params(new.message(round_id)),
        }
        found = (await conn.execute(postgres_sql.OPEN, params)).one()
        # the player's id as the database has it (another process may have seated them first)
        return self._card_written(seen, new, room_id, found.player_id or player_id, round_id)


# --- recording a batch: the parameters -----------------------------------------------------------


async def _seat(conn: AsyncConnection, seats: list[Seat], now: datetime) -> None:
    """The players the batch's jobs name, written in one statement (`postgres_sql.SEAT`)."""
    if not seats:
        return
    params = {
        "ids": [s.lane for s in seats],
        "rooms": [s.room_id for s in seats],
        "users": [s.tg_user_id for s in seats],
        "names": [s.name for s in seats],
        "fallbacks": [s.fallback_name for s in seats],
        "now": now,
    }
    await conn.execute(postgres_sql.SEAT, params)


def _lookup_params(attempts: Sequence[Attempt], seats: Mapping[str, Seat]) -> dict[str, Any]:
    """Per guess: its ids, and its Telegram user when its job names one (0: none)."""
    users = [seats[a.player_id].tg_user_id if a.player_id in seats else 0 for a in attempts]
    return {
        "guess_ids": [a.guess_id for a in attempts],
        "round_ids": [a.round_id for a in attempts],
        "player_ids": [a.player_id for a in attempts],
        "room_ids": [a.room_id for a in attempts],
        "users": users,
    }


def _write_params(decision: Decision) -> dict[str, Any]:
    """The decision as the write's arrays, one per column of each table's rows."""
    guesses = decision.new_guesses
    tallies = sorted(decision.tallies.items())
    closings = decision.closings
    messages = decision.messages
    return {
        "now": decision.now,
        "g_ids": [a.guess_id for a, _ in guesses],
        "g_rounds": [a.round_id for a, _ in guesses],
        "g_players": [a.player_id for a, _ in guesses],
        "g_texts": ["".join(a.emojis) for a, _ in guesses],
        "g_exact": [v.exact for _, v in guesses],
        "g_misplaced": [v.misplaced for _, v in guesses],
        "g_attempts": [v.attempt_no for _, v in guesses],
        "g_late": [v.late for _, v in guesses],
        "t_rooms": [room for (room, _), _ in tallies],
        "t_players": [player for (_, player), _ in tallies],
        "t_points": [t.points for _, t in tallies],
        "t_wins": [t.wins for _, t in tallies],
        "t_guesses": [t.guesses for _, t in tallies],
        "t_best": [t.best_solve for _, t in tallies],
        "c_rounds": [c.round_id for c in closings],
        "c_winners": [c.winner_player_id for c in closings],
        "c_guesses": [c.winning_guess_id for c in closings],
        "c_reasons": [c.reason for c in closings],
        "m_chats": [m.chat_id for m in messages],
        "m_threads": [m.thread_id for m in messages],
        "m_texts": [m.text for m in messages],
        "m_kinds": [m.kind for m in messages],
        "m_replies": [m.reply_to for m in messages],
        "m_markups": [m.markup for m in messages],
        "m_rounds": [m.round_id for m in messages],
        "m_guesses": [m.guess_id for m in messages],
        "m_names": [m.player_name for m in messages],
    }


# --- opening a daily: the look's row, the write's parameters -------------------------------------


def _room(r: Any, chat: PrivateChat) -> Room:
    return Room(
        id=r.room_id,
        chat_id=chat.chat_id,
        thread_id=chat.thread_id,
        title=r.title,
        length=r.room_length,
        palette=r.room_palette,
        palette_size=r.palette_size,
        repeats=r.room_repeats,
        language=r.language,
        ceiling=r.ceiling,
        round_timeout_s=r.round_timeout_s,
        created=r.created,
    )


def _open_round(r: Any) -> Round:
    return Round(
        id=r.o_id,
        room_id=r.room_id,
        secret=r.o_secret,
        palette=r.o_palette,
        length=r.o_length,
        repeats=r.o_repeats,
        started_at=r.o_started,
        expires_at=r.o_expires,
        ended_at=None,
        kind=r.o_kind,
        max_attempts=r.o_max_attempts,
    )


def _result(r: Any, chat: PrivateChat, day: date) -> DailyResult:
    return DailyResult(
        day=day,
        tg_user_id=chat.tg_user_id,
        round_id=r.r_round,
        display_name=r.r_name,
        started_at=r.r_started,
        finished_at=r.r_finished,
        cracked=r.r_cracked,
        rows=r.r_rows,
    )


def _room_params(seen: Seen, new: NewDaily, room_id: str) -> dict[str, Any]:
    """The chat's room: inserted when new, else told the language it speaks now."""
    chat = new.chat
    return {
        "room": room_id,
        "new_room": seen.room is None,
        "chat": chat.chat_id,
        "thread": chat.thread_id,
        "title": chat.title[:255],
        "room_length": DEFAULT_LENGTH,
        "palette_size": DEFAULT_PALETTE_SIZE,
        "lang": new.language,
        "ceiling": chat.default_ceiling,
        "timeout": chat.round_timeout_s,
    }


def _player_params(seen: Seen, chat: PrivateChat, player_id: str) -> dict[str, Any]:
    """The player: written when new or renamed."""
    name = chat.name[:255]
    return {
        "player": player_id,
        "user": chat.tg_user_id,
        "name": name,
        "write_player": seen.player_id is None or seen.player_name != name,
    }


def _round_params(new: NewDaily, round_id: int) -> dict[str, Any]:
    """The daily's round and the player's result of the day."""
    puzzle = new.puzzle
    return {
        "round": round_id,
        "secret": "".join(puzzle.secret),
        "palette": "".join(puzzle.palette),
        "length": puzzle.length,
        "expires": new.expires_at,
        "kind": ROUND_DAILY,
        "max_attempts": puzzle.max_attempts,
        "day": puzzle.day,
    }


def _post_params(message: Message) -> dict[str, Any]:
    """The puzzle's outbox row."""
    return {
        "m_thread": message.thread_id,
        "m_text": message.text,
        "m_kind": message.kind,
        "m_markup": message.markup,
    }
