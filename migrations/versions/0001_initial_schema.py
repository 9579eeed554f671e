"""Initial schema: rooms, players, rounds, guesses, leaderboard, bans, audit log, outbox.

Hand-checked against codemojex/db/models.py; tests/db/test_migrations.py proves the head and
the models agree. Timestamps are DateTime(timezone=True) (the models wrap it in UTCDateTime).
The two partial indexes carry both dialects' WHERE: one open round per room, pending outbox.

Revision ID: 0001
Revises:
Create Date: 2026-11-29 12:48:03
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# SQLite autoincrements only INTEGER PRIMARY KEY.
BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
# The first schema: no code ran before it.
expand_only: bool = False


def upgrade() -> None:
    op.create_table(
        "rooms",
        sa.Column("id", sa.String(length=29), nullable=False),
        sa.Column("chat_id", sa.BigInteger(), nullable=False),
        sa.Column("title", sa.String(length=255), nullable=False),
        sa.Column("length", sa.Integer(), nullable=False),
        sa.Column("palette", sa.Text(), nullable=True),
        sa.Column("palette_size", sa.Integer(), nullable=False),
        sa.Column("ceiling", sa.Integer(), nullable=False),
        sa.Column("round_timeout_s", sa.Integer(), nullable=False),
        sa.Column("created", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_rooms")),
        sa.UniqueConstraint("chat_id", name=op.f("uq_rooms_chat_id")),
    )
    op.create_table(
        "audit_log",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("room_id", sa.String(length=29), nullable=True),
        sa.Column("actor_tg_id", sa.BigInteger(), nullable=True),
        sa.Column("action", sa.String(length=32), nullable=False),
        sa.Column("args", sa.Text(), nullable=False),
        sa.Column("allowed", sa.Boolean(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["room_id"], ["rooms.id"], name=op.f("fk_audit_log_room_id_rooms"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_log")),
    )
    op.create_index(op.f("ix_audit_log_room_id"), "audit_log", ["room_id"], unique=False)
    op.create_table(
        "players",
        sa.Column("id", sa.String(length=29), nullable=False),
        sa.Column("room_id", sa.String(length=29), nullable=False),
        sa.Column("tg_user_id", sa.BigInteger(), nullable=False),
        sa.Column("display_name", sa.String(length=255), nullable=False),
        sa.Column("created", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["room_id"], ["rooms.id"], name=op.f("fk_players_room_id_rooms"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_players")),
        sa.UniqueConstraint("room_id", "tg_user_id", name=op.f("uq_players_room_id_tg_user_id")),
    )
    op.create_index(op.f("ix_players_tg_user_id"), "players", ["tg_user_id"], unique=False)
    op.create_table(
        "bans",
        sa.Column("room_id", sa.String(length=29), nullable=False),
        sa.Column("player_id", sa.String(length=29), nullable=False),
        sa.Column("actor_tg_id", sa.BigInteger(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["player_id"],
            ["players.id"],
            name=op.f("fk_bans_player_id_players"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["room_id"], ["rooms.id"], name=op.f("fk_bans_room_id_rooms"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("room_id", "player_id", name=op.f("pk_bans")),
    )
    op.create_table(
        "leaderboard",
        sa.Column("room_id", sa.String(length=29), nullable=False),
        sa.Column("player_id", sa.String(length=29), nullable=False),
        sa.Column("points", sa.Integer(), nullable=False),
        sa.Column("wins", sa.Integer(), nullable=False),
        sa.Column("guesses", sa.Integer(), nullable=False),
        sa.Column("best_solve", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["player_id"],
            ["players.id"],
            name=op.f("fk_leaderboard_player_id_players"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["room_id"], ["rooms.id"], name=op.f("fk_leaderboard_room_id_rooms"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("room_id", "player_id", name=op.f("pk_leaderboard")),
    )
    op.create_table(
        "rounds",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("room_id", sa.String(length=29), nullable=False),
        sa.Column("secret", sa.Text(), nullable=False),
        sa.Column("palette", sa.Text(), nullable=False),
        sa.Column("length", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("winner_player_id", sa.String(length=29), nullable=True),
        sa.Column("winning_guess_id", sa.String(length=29), nullable=True),
        sa.Column("end_reason", sa.String(length=16), nullable=True),
        sa.Column("announce_message_id", sa.BigInteger(), nullable=True),
        sa.ForeignKeyConstraint(
            ["room_id"], ["rooms.id"], name=op.f("fk_rounds_room_id_rooms"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["winner_player_id"],
            ["players.id"],
            name=op.f("fk_rounds_winner_player_id_players"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_rounds")),
    )
    op.create_index(
        "ix_rounds_open_expiry",
        "rounds",
        ["expires_at"],
        unique=False,
        postgresql_where=sa.text("ended_at IS NULL"),
        sqlite_where=sa.text("ended_at IS NULL"),
    )
    op.create_index(
        "uq_rounds_one_open",
        "rounds",
        ["room_id"],
        unique=True,
        postgresql_where=sa.text("ended_at IS NULL"),
        sqlite_where=sa.text("ended_at IS NULL"),
    )
    op.create_table(
        "guesses",
        sa.Column("id", sa.String(length=29), nullable=False),
        sa.Column("round_id", BIG_ID, nullable=False),
        sa.Column("player_id", sa.String(length=29), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("exact", sa.Integer(), nullable=True),
        sa.Column("misplaced", sa.Integer(), nullable=True),
        sa.Column("attempt_no", sa.Integer(), nullable=True),
        sa.Column("late", sa.Boolean(), nullable=False),
        sa.Column("scored_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["player_id"],
            ["players.id"],
            name=op.f("fk_guesses_player_id_players"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["round_id"], ["rounds.id"], name=op.f("fk_guesses_round_id_rounds"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_guesses")),
    )
    op.create_index(
        op.f("ix_guesses_round_id_player_id"), "guesses", ["round_id", "player_id"], unique=False
    )
    op.create_table(
        "outbox",
        sa.Column("id", BIG_ID, autoincrement=True, nullable=False),
        sa.Column("chat_id", sa.BigInteger(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("reply_to_message_id", sa.BigInteger(), nullable=True),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("round_id", BIG_ID, nullable=True),
        sa.Column("guess_id", sa.String(length=29), nullable=True),
        sa.Column("player_name", sa.String(length=255), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("claimed_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("claimed_by", sa.String(length=64), nullable=True),
        sa.Column("sent_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("sent_message_id", sa.BigInteger(), nullable=True),
        sa.ForeignKeyConstraint(
            ["round_id"], ["rounds.id"], name=op.f("fk_outbox_round_id_rounds"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_outbox")),
    )
    op.create_index(op.f("ix_outbox_guess_id"), "outbox", ["guess_id"], unique=False)
    op.create_index(
        "ix_outbox_pending",
        "outbox",
        ["chat_id", "id"],
        unique=False,
        postgresql_where=sa.text("sent_at IS NULL"),
        sqlite_where=sa.text("sent_at IS NULL"),
    )


def downgrade() -> None:
    op.drop_index(
        "ix_outbox_pending",
        table_name="outbox",
        postgresql_where=sa.text("sent_at IS NULL"),
        sqlite_where=sa.text("sent_at IS NULL"),
    )
    op.drop_index(op.f("ix_outbox_guess_id"), table_name="outbox")
    op.drop_table("outbox")
    op.drop_index(op.f("ix_guesses_round_id_player_id"), table_name="guesses")
    op.drop_table("guesses")
    op.drop_index(
        "uq_rounds_one_open",
        table_name="rounds",
        postgresql_where=sa.text("ended_at IS NULL"),
        sqlite_where=sa.text("ended_at IS NULL"),
    )
    op.drop_index(
        "ix_rounds_open_expiry",
        table_name="rounds",
        postgresql_where=sa.text("ended_at IS NULL"),
        sqlite_where=sa.text("ended_at IS NULL"),
    )
    op.drop_table("rounds")
    op.drop_table("leaderboard")
    op.drop_table("bans")
    op.drop_index(op.f("ix_players_tg_user_id"), table_name="players")
    op.drop_table("players")
    op.drop_index(op.f("ix_audit_log_room_id"), table_name="audit_log")
    op.drop_table("audit_log")
    op.drop_table("rooms")
