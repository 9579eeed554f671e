"""Commands apply once per message, durably: a round records the message that opened it
(`rounds.origin_chat_id`, `origin_message_id`, unique where set), an audit row the message it
came in (`audit_log.chat_id`, `message_id`, unique where set), and what the lanes' pause and
weights are derived from is kept with the room and the player (`rooms.paused`,
`players.weight`). Existing rows get none: rounds opened before are ended by a command sent
after they started, rooms are not paused, players keep the lanes' weight.

Plain ADD/DROP COLUMN and CREATE/DROP INDEX on both dialects (no batch table rebuild, which
would have to carry the partial indexes of `rounds` along).

Revision ID: 0012_command_origins
Revises: 0011_outbox_round
Create Date: 2026-12-05 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012_command_origins"
down_revision: str | Sequence[str] | None = "0011_outbox_round"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
# Columns with defaults and indexes on them: the code before it never names them.
expand_only: bool = True

_ROUND_ORIGIN = sa.text("origin_message_id IS NOT NULL")
_AUDIT_ORIGIN = sa.text("message_id IS NOT NULL")


def upgrade() -> None:
    op.add_column("rounds", sa.Column("origin_chat_id", sa.BigInteger(), nullable=True))
    op.add_column("rounds", sa.Column("origin_message_id", sa.BigInteger(), nullable=True))
    op.create_index(
        "uq_rounds_origin",
        "rounds",
        ["origin_chat_id", "origin_message_id"],
        unique=True,
        postgresql_where=_ROUND_ORIGIN,
        sqlite_where=_ROUND_ORIGIN,
    )
    op.add_column("audit_log", sa.Column("chat_id", sa.BigInteger(), nullable=True))
    op.add_column("audit_log", sa.Column("message_id", sa.BigInteger(), nullable=True))
    op.create_index(
        "uq_audit_log_message",
        "audit_log",
        ["chat_id", "message_id"],
        unique=True,
        postgresql_where=_AUDIT_ORIGIN,
        sqlite_where=_AUDIT_ORIGIN,
    )
    op.add_column(
        "rooms", sa.Column("paused", sa.Boolean(), server_default=sa.false(), nullable=False)
    )
    op.add_column("players", sa.Column("weight", sa.Integer(), nullable=True))


def downgrade() -> None:
    op.drop_column("players", "weight")
    op.drop_column("rooms", "paused")
    op.drop_index("uq_audit_log_message", table_name="audit_log")
    op.drop_column("audit_log", "message_id")
    op.drop_column("audit_log", "chat_id")
    op.drop_index("uq_rounds_origin", table_name="rounds")
    op.drop_column("rounds", "origin_message_id")
    op.drop_column("rounds", "origin_chat_id")
