"""The daily code: `rounds.kind` ("group", or "daily": a player's daily in their private chat)
and `rounds.max_attempts` (the daily's 8); the day's puzzle (`daily_puzzles`, one row a day),
a player's daily of a day (`daily_results`, with its round) and a player's streaks and attempts
histogram (`daily_records`).

Revision ID: 0010_daily
Revises: 0007_forum_topics
Create Date: 2026-12-02 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010_daily"
down_revision: str | Sequence[str] | None = "0007_forum_topics"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
# Columns with defaults and new tables: the code before it never names them.
expand_only: bool = True

# As rounds.id (0001): SQLite's INTEGER, Postgres's BIGINT. Timestamps are
# DateTime(timezone=True) (the models wrap it in UTCDateTime).
BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
TIMESTAMP = sa.DateTime(timezone=True)


def upgrade() -> None:
    # A constant default: no table rewrite on Postgres (11+), a plain ADD COLUMN on SQLite.
    op.add_column(
        "rounds",
        sa.Column("kind", sa.String(length=8), nullable=False, server_default="group"),
    )
    op.add_column("rounds", sa.Column("max_attempts", sa.Integer(), nullable=True))
    op.create_table(
        "daily_puzzles",
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("palette", sa.Text(), nullable=False),
        sa.Column("secret", sa.Text(), nullable=False),
        sa.Column("length", sa.Integer(), nullable=False),
        sa.Column("max_attempts", sa.Integer(), nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("day", name=op.f("pk_daily_puzzles")),
    )
    op.create_table(
        "daily_results",
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("tg_user_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("round_id", BIG_ID, nullable=False),
        sa.Column("display_name", sa.String(length=255), nullable=False),
        sa.Column("started_at", TIMESTAMP, nullable=False),
        sa.Column("finished_at", TIMESTAMP, nullable=True),
        sa.Column("cracked", sa.Boolean(), nullable=False),
        sa.Column("rows", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["round_id"],
            ["rounds.id"],
            name=op.f("fk_daily_results_round_id_rounds"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("day", "tg_user_id", name=op.f("pk_daily_results")),
        sa.UniqueConstraint("round_id", name=op.f("uq_daily_results_round_id")),
    )
    op.create_table(
        "daily_records",
        sa.Column("tg_user_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("streak", sa.Integer(), nullable=False),
        sa.Column("best", sa.Integer(), nullable=False),
        sa.Column("last_cracked", sa.Date(), nullable=True),
        sa.Column("histogram", sa.Text(), nullable=False),
        sa.Column("updated_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("tg_user_id", name=op.f("pk_daily_records")),
    )


def downgrade() -> None:
    op.drop_table("daily_records")
    op.drop_table("daily_results")
    op.drop_table("daily_puzzles")
    # The dailies' rounds would otherwise pass for group rounds (with their guesses).
    # (By hand: migrations run without SQLite's foreign-key enforcement, so nothing cascades.)
    dailies = "(SELECT id FROM rounds WHERE kind = 'daily')"
    op.execute(sa.text(f"DELETE FROM guesses WHERE round_id IN {dailies}"))
    op.execute(sa.text(f"UPDATE outbox SET round_id = NULL WHERE round_id IN {dailies}"))
    op.execute(sa.text("DELETE FROM rounds WHERE kind = 'daily'"))
    with op.batch_alter_table("rounds") as batch:
        batch.drop_column("max_attempts")
        batch.drop_column("kind")
