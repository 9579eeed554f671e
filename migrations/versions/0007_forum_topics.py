"""A round per forum topic, and keyboards on posts: `rooms.thread_id` (the topic a room is; 0
for a chat without topics and a forum's General topic) with the room key (chat_id, thread_id)
in place of chat_id alone; `outbox.thread_id` (the topic to post in) and `outbox.markup` (an
inline keyboard posted with the text: the round's tap-to-guess buttons).

The room key changes through a batch on SQLite (a table rebuild: rooms has no partial index
to carry along, and migrations run without SQLite's foreign-key enforcement, so the rebuild
does not cascade); plain ALTERs on Postgres.

Revision ID: 0007_forum_topics
Revises: 0006_rooms_title
Create Date: 2026-12-01 16:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007_forum_topics"
down_revision: str | Sequence[str] | None = "0006_rooms_title"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
# A room's key gains its topic: the code before it upserts on the old key.
expand_only: bool = False


def upgrade() -> None:
    with op.batch_alter_table("rooms") as batch:
        batch.add_column(
            sa.Column("thread_id", sa.BigInteger(), nullable=False, server_default=sa.text("0"))
        )
        batch.drop_constraint("uq_rooms_chat_id", type_="unique")
        batch.create_unique_constraint("uq_rooms_chat_id_thread_id", ["chat_id", "thread_id"])
    op.add_column("outbox", sa.Column("thread_id", sa.BigInteger(), nullable=True))
    op.add_column("outbox", sa.Column("markup", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("outbox", "markup")
    op.drop_column("outbox", "thread_id")
    # Topics' rooms cannot live under a one-room-per-chat key: they go (with their rounds,
    # players and records, by the foreign keys' cascades on Postgres).
    op.execute(sa.text("DELETE FROM rooms WHERE thread_id <> 0"))
    with op.batch_alter_table("rooms") as batch:
        batch.drop_constraint("uq_rooms_chat_id_thread_id", type_="unique")
        batch.create_unique_constraint("uq_rooms_chat_id", ["chat_id"])
        batch.drop_column("thread_id")
