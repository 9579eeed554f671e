"""The tables of Codemojex, as SQLAlchemy 2 typed models.

Portable between Postgres (asyncpg, production) and SQLite (aiosqlite, the embedded demo):
timestamps go through `UTCDateTime` (aware UTC in Python on both), big integer keys fall back
to SQLite's INTEGER so its rowid autoincrement works, and partial indexes carry both the
`postgresql_where` and the `sqlite_where` clause.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import TYPE_CHECKING

from sqlalchemy import (
    BigInteger,
    Boolean,
    Date,
    DateTime,
    Dialect,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    false,
    text,
    true,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

from codemojex import scoring
from codemojex.values import ids
from codemojex.values.clock import utcnow

# Deterministic constraint names, so the migration and the models name things alike.
NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

ID_LEN = 29  # three-letter brand + 26-character ULID body

# SQLite autoincrements only an `INTEGER PRIMARY KEY` (the rowid alias), never a BIGINT one.
BigId = BigInteger().with_variant(Integer(), "sqlite")


def split_emojis(value: str) -> tuple[str, ...]:
    """A stored emoji string (palette or secret) back into its emojis (grapheme clusters)."""
    return scoring.split_emojis(value)


class UTCDateTime(TypeDecorator[datetime]):
    """Aware UTC datetimes in, aware UTC datetimes out, on Postgres and on SQLite.

    SQLite has no time zones: its DATETIME stores the wall time it is given (the zone left
    out), UTC here, and we put the zone back on read. Naive datetimes are refused rather than
    guessed at.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime: timestamps must carry a time zone")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


def _mint_room() -> str:
    return ids.mint(ids.ROOM)


def _mint_player() -> str:
    return ids.mint(ids.PLAYER)


class Room(Base):
    """A Telegram group chat, or one topic of a forum supergroup, with the settings its next
    rounds are drawn with."""

    __tablename__ = "rooms"
    __table_args__ = (
        # The ops page lists rooms in title order, a page at a time (db/store/ops.py).
        Index("ix_rooms_title_id", "title", "id"),
        UniqueConstraint("chat_id", "thread_id"),
    )

    id: Mapped[str] = mapped_column(String(ID_LEN), primary_key=True, default=_mint_room)
    chat_id: Mapped[int] = mapped_column(BigInteger)
    # The forum topic (its message_thread_id) that is this room; 0 for a chat without topics
    # and for a forum's General topic. Not NULL: a unique key treats NULLs as all different.
    thread_id: Mapped[int] = mapped_column(BigInteger, default=0, server_default=text("0"))
    title: Mapped[str] = mapped_column(String(255), default="")
    length: Mapped[int] = mapped_column(Integer)
    # None: every round draws a fresh palette of `palette_size` emojis; otherwise a fixed
    # palette chosen by an admin (/settings palette=…), stored as the emojis run together.
    palette: Mapped[str | None] = mapped_column(Text, default=None)
    palette_size: Mapped[int] = mapped_column(Integer)
    # False: no emoji twice in a secret (/settings repeats=off); the store then keeps the
    # palette at least `length` emojis long.
    repeats: Mapped[bool] = mapped_column(Boolean, default=True, server_default=true())
    # The language of everything posted here (a `codemojex.locale` language: "ru", "pt_BR").
    # None until chosen: the first round takes its starter's (/settings lang=… changes it).
    language: Mapped[str | None] = mapped_column(String(16), default=None)
    ceiling: Mapped[int] = mapped_column(Integer)
    round_timeout_s: Mapped[int] = mapped_column(Integer)
    # Scoring paused (/pause, /resume, the ops page): the record the lanes' pause is derived
    # from, so that a command delivered again cannot undo a later one (bot/once.py).
    paused: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    created: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    @property
    def palette_emojis(self) -> tuple[str, ...] | None:
        return None if self.palette is None else split_emojis(self.palette)

    def __repr__(self) -> str:
        return f"Room(id={self.id!r}, chat_id={self.chat_id!r})"


class Player(Base):
    """One Telegram user in one room; the id is also the player's lane."""

    __tablename__ = "players"
    __table_args__ = (UniqueConstraint("room_id", "tg_user_id"),)

    id: Mapped[str] = mapped_column(String(ID_LEN), primary_key=True, default=_mint_player)
    room_id: Mapped[str] = mapped_column(ForeignKey("rooms.id", ondelete="CASCADE"))
    tg_user_id: Mapped[int] = mapped_column(BigInteger, index=True)
    display_name: Mapped[str] = mapped_column(String(255), default="")
    # The weight an admin gave the player's lane (/weight); None: never set (the lanes'
    # default). The record the lanes' weight is derived from (bot/once.py).
    weight: Mapped[int | None] = mapped_column(Integer, default=None)
    created: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    def __repr__(self) -> str:
        return f"Player(id={self.id!r}, room_id={self.room_id!r}, tg_user_id={self.tg_user_id!r})"


class _Code:
    """A stored palette and secret (emojis run together), read back as emojis."""

    if TYPE_CHECKING:  # the mapped classes declare the columns
        palette: str
        secret: str

    @property
    def palette_emojis(self) -> tuple[str, ...]:
        return split_emojis(self.palette)

    @property
    def secret_emojis(self) -> tuple[str, ...]:
        return split_emojis(self.secret)


class Round(_Code, Base):
    """One secret code of one room. Open while `ended_at` is NULL; at most one open per room."""

    __tablename__ = "rounds"
    __table_args__ = (
        # The database, not the code, guarantees one open round per room.
        Index(
            "uq_rounds_one_open",
            "room_id",
            unique=True,
            postgresql_where=text("ended_at IS NULL"),
            sqlite_where=text("ended_at IS NULL"),
        ),
        Index(
            "ix_rounds_open_expiry",
            "expires_at",
            postgresql_where=text("ended_at IS NULL"),
            sqlite_where=text("ended_at IS NULL"),
        ),
        # A room's won rounds by when they were won: this week's board (store.weekly_board).
        Index(
            "ix_rounds_won",
            "room_id",
            "ended_at",
            postgresql_where=text("winning_guess_id IS NOT NULL"),
            sqlite_where=text("winning_guess_id IS NOT NULL"),
        ),
        # One round per command message: a /newgame delivered again, however late, finds the
        # round it opened and opens nothing.
        Index(
            "uq_rounds_origin",
            "origin_chat_id",
            "origin_message_id",
            unique=True,
            postgresql_where=text("origin_message_id IS NOT NULL"),
            sqlite_where=text("origin_message_id IS NOT NULL"),
        ),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    room_id: Mapped[str] = mapped_column(ForeignKey("rooms.id", ondelete="CASCADE"))
    secret: Mapped[str] = mapped_column(Text)
    palette: Mapped[str] = mapped_column(Text)
    length: Mapped[int] = mapped_column(Integer)
    # Whether the secret could repeat an emoji: the room's setting when the round started (a
    # round keeps the rules it started with, as it keeps its length and palette).
    repeats: Mapped[bool] = mapped_column(Boolean, default=True, server_default=true())
    started_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)
    ended_at: Mapped[datetime | None] = mapped_column(UTCDateTime, default=None)
    winner_player_id: Mapped[str | None] = mapped_column(
        ForeignKey("players.id", ondelete="SET NULL"), default=None
    )
    # No foreign key: guesses reference rounds, and a cycle would need ALTER TABLE, which
    # SQLite cannot do. The id is written in the same transaction as the guess row.
    winning_guess_id: Mapped[str | None] = mapped_column(String(ID_LEN), default=None)
    end_reason: Mapped[str | None] = mapped_column(String(16), default=None)
    announce_message_id: Mapped[int | None] = mapped_column(BigInteger, default=None)
    # "group": a group's (or forum topic's) round; "daily": a player's daily code in their
    # private chat (its result is a DailyResult). codemojex.values.types names them.
    kind: Mapped[str] = mapped_column(String(8), default="group", server_default="group")
    # A player's scored guesses in the round at most (the daily's 8); None: no cap.
    max_attempts: Mapped[int | None] = mapped_column(Integer, default=None)
    # The message that opened the round (/newgame): its chat and id. None for a daily's, and
    # for rounds opened before they were recorded. A command ends only a round opened before
    # it was sent (game.rounds.opened_before).
    origin_chat_id: Mapped[int | None] = mapped_column(BigInteger, default=None)
    origin_message_id: Mapped[int | None] = mapped_column(BigInteger, default=None)

    @property
    def is_open(self) -> bool:
        return self.ended_at is None

    def __repr__(self) -> str:
        # Never the secret: rounds end up in logs and tracebacks.
        return (
            f"Round(id={self.id!r}, room_id={self.room_id!r}, length={self.length!r}, "
            f"open={self.ended_at is None!r})"
        )


class Guess(Base):
    """A guess as recorded by the ScoreWorker; the id is the lane job id, so re-delivery is a no-op.

    A guess that arrives after its round closed is kept with `late` set and no score: keeping it
    is what makes its re-delivery a no-op too (and its "round already solved" answer unique).
    """

    __tablename__ = "guesses"
    __table_args__ = (Index(None, "round_id", "player_id"),)

    id: Mapped[str] = mapped_column(String(ID_LEN), primary_key=True)
    round_id: Mapped[int] = mapped_column(ForeignKey("rounds.id", ondelete="CASCADE"))
    player_id: Mapped[str] = mapped_column(ForeignKey("players.id", ondelete="CASCADE"))
    text: Mapped[str] = mapped_column(Text)
    exact: Mapped[int | None] = mapped_column(Integer, default=None)
    misplaced: Mapped[int | None] = mapped_column(Integer, default=None)
    attempt_no: Mapped[int | None] = mapped_column(Integer, default=None)
    late: Mapped[bool] = mapped_column(Boolean, default=False)
    scored_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    def __repr__(self) -> str:
        return f"Guess(id={self.id!r}, round_id={self.round_id!r}, player_id={self.player_id!r})"


class LeaderboardEntry(Base):
    """A player's record in one room."""

    __tablename__ = "leaderboard"

    room_id: Mapped[str] = mapped_column(
        ForeignKey("rooms.id", ondelete="CASCADE"), primary_key=True
    )
    player_id: Mapped[str] = mapped_column(
        ForeignKey("players.id", ondelete="CASCADE"), primary_key=True
    )
    points: Mapped[int] = mapped_column(Integer, default=0)
    wins: Mapped[int] = mapped_column(Integer, default=0)
    guesses: Mapped[int] = mapped_column(Integer, default=0)
    best_solve: Mapped[int | None] = mapped_column(Integer, default=None)  # fewest attempts

    def __repr__(self) -> str:
        return f"LeaderboardEntry(room_id={self.room_id!r}, player_id={self.player_id!r})"


class Ban(Base):
    """A player banned in one room (the same Telegram user may still play elsewhere)."""

    __tablename__ = "bans"

    room_id: Mapped[str] = mapped_column(
        ForeignKey("rooms.id", ondelete="CASCADE"), primary_key=True
    )
    player_id: Mapped[str] = mapped_column(
        ForeignKey("players.id", ondelete="CASCADE"), primary_key=True
    )
    actor_tg_id: Mapped[int | None] = mapped_column(BigInteger, default=None)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    def __repr__(self) -> str:
        return f"Ban(room_id={self.room_id!r}, player_id={self.player_id!r})"


class AuditLog(Base):
    """Every admin action, allowed or refused (refused ones within their sender's answer
    budget, state/budget.py), kept for CODEMOJEX_AUDIT_KEEP_DAYS."""

    __tablename__ = "audit_log"
    __table_args__ = (
        # The retention trim: the oldest rows first, a batch at a time.
        Index("ix_audit_log_at", "at"),
        # One user's recent refusals in one room (it served the refused-attempt limit kept in
        # this table before the answer budget in Redis replaced it).
        Index(
            "ix_audit_log_refused",
            "room_id",
            "actor_tg_id",
            "at",
            postgresql_where=text("NOT allowed"),
            sqlite_where=text("NOT allowed"),
        ),
        # One row per command message: an admin command applies once, in the transaction that
        # writes its row (INSERT … ON CONFLICT DO NOTHING, store.admin.audit_once).
        Index(
            "uq_audit_log_message",
            "chat_id",
            "message_id",
            unique=True,
            postgresql_where=text("message_id IS NOT NULL"),
            sqlite_where=text("message_id IS NOT NULL"),
        ),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    room_id: Mapped[str | None] = mapped_column(
        ForeignKey("rooms.id", ondelete="SET NULL"), default=None, index=True
    )
    actor_tg_id: Mapped[int | None] = mapped_column(BigInteger, default=None)
    action: Mapped[str] = mapped_column(String(32))
    args: Mapped[str] = mapped_column(Text, default="")
    allowed: Mapped[bool] = mapped_column(Boolean)
    at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # The command message (chat, message id) the action came in; None for the ops page's.
    chat_id: Mapped[int | None] = mapped_column(BigInteger, default=None)
    message_id: Mapped[int | None] = mapped_column(BigInteger, default=None)

    def __repr__(self) -> str:
        return f"AuditLog(id={self.id!r}, action={self.action!r}, allowed={self.allowed!r})"


class Outbox(Base):
    """A message to post, written in the transaction that decided it; marked sent after posting.

    `claimed_until`/`claimed_by` is a lease taken by one sender (see
    `store.outbox.claim_outbox`) so two sender processes never post the same row; `sent_at` is
    only ever set once.
    """

    __tablename__ = "outbox"
    __table_args__ = (
        Index(
            "ix_outbox_pending",
            "chat_id",
            "id",
            postgresql_where=text("sent_at IS NULL"),
            sqlite_where=text("sent_at IS NULL"),
        ),
        # A round's unsent rows: its keys_off rows are found by round when its announcement is
        # marked sent or the round closes (`store.outbox._point_keys_off`); without it, every
        # announcement posted scanned the whole outbox (80-140 ms a post with 200,000 rows,
        # bench.daily). No `kind` in the predicate: the statement's kind is a parameter, which
        # a prepared statement's generic plan could not match to a partial index.
        Index(
            "ix_outbox_round_pending",
            "round_id",
            postgresql_where=text("sent_at IS NULL"),
            sqlite_where=text("sent_at IS NULL"),
        ),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    chat_id: Mapped[int] = mapped_column(BigInteger)
    # The forum topic to post in (message_thread_id); None outside topics.
    thread_id: Mapped[int | None] = mapped_column(BigInteger, default=None)
    text: Mapped[str] = mapped_column(Text)
    # The message answered; for a "keys_off" row, the message whose keyboard is removed.
    reply_to_message_id: Mapped[int | None] = mapped_column(BigInteger, default=None)
    # An inline keyboard to post with the text, as Telegram's InlineKeyboardMarkup JSON.
    markup: Mapped[str | None] = mapped_column(Text, default=None)
    kind: Mapped[str] = mapped_column(String(16))
    round_id: Mapped[int | None] = mapped_column(
        ForeignKey("rounds.id", ondelete="SET NULL"), default=None
    )
    guess_id: Mapped[str | None] = mapped_column(String(ID_LEN), default=None, index=True)
    # Who a result line is about, so a sender coalescing several results can prefix them.
    player_name: Mapped[str | None] = mapped_column(String(255), default=None)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    claimed_until: Mapped[datetime | None] = mapped_column(UTCDateTime, default=None)
    claimed_by: Mapped[str | None] = mapped_column(String(64), default=None)
    sent_at: Mapped[datetime | None] = mapped_column(UTCDateTime, default=None)
    sent_message_id: Mapped[int | None] = mapped_column(BigInteger, default=None)

    def __repr__(self) -> str:
        return f"Outbox(id={self.id!r}, chat_id={self.chat_id!r}, kind={self.kind!r})"


class DailyPuzzle(_Code, Base):
    """One UTC day's code, the same for the whole world: drawn once (the first INSERT wins,
    ON CONFLICT DO NOTHING) and kept, one row a day, so that #N keeps counting from the
    deployment's first daily."""

    __tablename__ = "daily_puzzles"

    day: Mapped[date] = mapped_column(Date, primary_key=True)
    number: Mapped[int] = mapped_column(Integer)  # N of "Daily #N"
    palette: Mapped[str] = mapped_column(Text)
    secret: Mapped[str] = mapped_column(Text)
    length: Mapped[int] = mapped_column(Integer)
    max_attempts: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    def __repr__(self) -> str:
        # Never the secret.
        return f"DailyPuzzle(day={self.day!r}, number={self.number!r})"


class DailyResult(Base):
    """A player's daily of one day: opened by /daily (with its round), its feedback rows kept
    with every scored guess, finished when cracked or out of attempts. Kept
    CODEMOJEX_DAILY_KEEP_DAYS days; it goes with its round (the trim deletes the round)."""

    __tablename__ = "daily_results"

    day: Mapped[date] = mapped_column(Date, primary_key=True)
    tg_user_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    round_id: Mapped[int] = mapped_column(ForeignKey("rounds.id", ondelete="CASCADE"), unique=True)
    # The name boards show (as when the daily was opened).
    display_name: Mapped[str] = mapped_column(String(255), default="")
    started_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime, default=None)
    cracked: Mapped[bool] = mapped_column(Boolean, default=False)
    # The (exact, misplaced) of every scored attempt, in order: "21,40" (values.daily.encode_rows).
    rows: Mapped[str] = mapped_column(Text, default="")

    def __repr__(self) -> str:
        return f"DailyResult(day={self.day!r}, tg_user_id={self.tg_user_id!r})"


class DailyRecord(Base):
    """A player's dailies over time: the streak of consecutive UTC days cracked (as of
    `last_cracked`), the best streak, and the attempts histogram (values.daily.Record). Written
    by the finish of a daily, under its round's lock."""

    __tablename__ = "daily_records"

    tg_user_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    streak: Mapped[int] = mapped_column(Integer, default=0)
    best: Mapped[int] = mapped_column(Integer, default=0)
    last_cracked: Mapped[date | None] = mapped_column(Date, default=None)
    # Finished dailies by attempts, then the not cracked: "0,1,4,2,0,0,0,0,1".
    histogram: Mapped[str] = mapped_column(Text, default="")
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    def __repr__(self) -> str:
        return f"DailyRecord(tg_user_id={self.tg_user_id!r})"


class SchemaStep(Base):
    """A migration applied to this database, as `migrations/env.py` records it after each step:
    its revision, the one before it and whether it is expand-only (the code of the revision
    before runs on the schema after it: `codemojex/ops/health.py` lets an older process
    serve on a database one such step ahead). Revisions from this table's own on."""

    __tablename__ = "schema_steps"

    revision: Mapped[str] = mapped_column(String(64), primary_key=True)
    down_revision: Mapped[str | None] = mapped_column(String(64), default=None)
    expand_only: Mapped[bool] = mapped_column(Boolean)
    applied_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    def __repr__(self) -> str:
        return f"SchemaStep(revision={self.revision!r}, expand_only={self.expand_only!r})"
