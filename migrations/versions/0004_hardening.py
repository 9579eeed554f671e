"""Hardening: the audit log's indexes for its retention trim (`at`) and for the refused-attempt
limit (one user's refusals in one room, partial: NOT allowed); player names without bidi
controls (the bot strips them from new and changed names; this cleans the stored ones).

Revision ID: 0004_hardening
Revises: 0002
Create Date: 2026-12-01 13:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004_hardening"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
# Rewrites rows and adds unique indexes the code before it could break.
expand_only: bool = False

# Unicode's Bidi_Control characters (as codemojex.bot.names strips them).
BIDI_CONTROLS = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


def upgrade() -> None:
    op.create_index("ix_audit_log_at", "audit_log", ["at"], unique=False)
    op.create_index(
        "ix_audit_log_refused",
        "audit_log",
        ["room_id", "actor_tg_id", "at"],
        unique=False,
        postgresql_where=sa.text("NOT allowed"),
        sqlite_where=sa.text("NOT allowed"),
    )
    players = sa.table(
        "players",
        sa.column("id", sa.String),
        sa.column("tg_user_id", sa.BigInteger),
        sa.column("display_name", sa.String),
    )
    conn = op.get_bind()
    marked = conn.execute(
        sa.select(players.c.id, players.c.tg_user_id, players.c.display_name).where(
            sa.or_(*(players.c.display_name.contains(c, autoescape=True) for c in BIDI_CONTROLS))
        )
    ).all()
    for player_id, tg_user_id, name in marked:
        clean = " ".join(name.translate({ord(c): None for c in BIDI_CONTROLS}).split())
        conn.execute(
            players.update()
            .where(players.c.id == player_id)
            .values(display_name=clean or f"player {tg_user_id}")
        )


def downgrade() -> None:
    op.drop_index("ix_audit_log_refused", table_name="audit_log")
    op.drop_index("ix_audit_log_at", table_name="audit_log")
