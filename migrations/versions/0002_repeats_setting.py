"""The repeats setting: `rooms.repeats` (/settings repeats=off) and `rounds.repeats` (what a
round was drawn with). Existing rows get true, the behaviour they were created with.

Plain ADD/DROP COLUMN on both dialects (no batch table rebuild, which would have to carry the
partial indexes of `rounds` along); dropping a column needs SQLite 3.35 or later.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29 20:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
# A column with a default: the code before it never names it.
expand_only: bool = True


def upgrade() -> None:
    for table in ("rooms", "rounds"):
        op.add_column(
            table,
            sa.Column("repeats", sa.Boolean(), server_default=sa.true(), nullable=False),
        )


def downgrade() -> None:
    for table in ("rounds", "rooms"):
        op.drop_column(table, "repeats")
