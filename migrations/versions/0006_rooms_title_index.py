"""An index on rooms (title, id): the ops page lists rooms in title order a page at a time
(a keyset read: the rows after the last one shown), without sorting every room.

Revision ID: 0006_rooms_title
Revises: 0005_room_language
Create Date: 2026-12-01 10:00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0006_rooms_title"
down_revision: str | Sequence[str] | None = "0005_room_language"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
# An index alone.
expand_only: bool = True


def upgrade() -> None:
    op.create_index("ix_rooms_title_id", "rooms", ["title", "id"])


def downgrade() -> None:
    op.drop_index("ix_rooms_title_id", table_name="rooms")
