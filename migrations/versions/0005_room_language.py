"""A room's language and this week's board: `rooms.language` (NULL = not chosen yet: the first
round takes its starter's language) and `ix_rounds_won`, a partial index of the rounds won, by
room and time, that `/top week` reads instead of scanning a room's rounds.

Plain ADD/DROP COLUMN and CREATE/DROP INDEX on both dialects (no batch table rebuild).

Revision ID: 0005_room_language
Revises: 0004_hardening
Create Date: 2026-12-01 13:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005_room_language"
down_revision: str | Sequence[str] | None = "0004_hardening"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
# A column and an index: the code before it never names them.
expand_only: bool = True

_WON = "winning_guess_id IS NOT NULL"


def upgrade() -> None:
    op.add_column("rooms", sa.Column("language", sa.String(length=16), nullable=True))
    op.create_index(
        "ix_rounds_won",
        "rounds",
        ["room_id", "ended_at"],
        postgresql_where=sa.text(_WON),
        sqlite_where=sa.text(_WON),
    )


def downgrade() -> None:
    op.drop_index("ix_rounds_won", table_name="rounds")
    op.drop_column("rooms", "language")
