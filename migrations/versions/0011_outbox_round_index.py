"""A partial index on the outbox's unsent rows by round: marking a round's announcement sent
(and closing a round) points the round's keys_off rows at it, which scanned the whole outbox
without one (every daily puzzle is an announcement: quadratic in a day's dailies).

Revision ID: 0011_outbox_round
Revises: 0010_daily
Create Date: 2026-12-02 09:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011_outbox_round"
down_revision: str | Sequence[str] | None = "0010_daily"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
# An index alone.
expand_only: bool = True

_UNSENT = sa.text("sent_at IS NULL")


def upgrade() -> None:
    op.create_index(
        "ix_outbox_round_pending",
        "outbox",
        ["round_id"],
        postgresql_where=_UNSENT,
        sqlite_where=_UNSENT,
    )


def downgrade() -> None:
    op.drop_index("ix_outbox_round_pending", table_name="outbox")
