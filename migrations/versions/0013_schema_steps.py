"""The steps applied, for the processes of the version before: `schema_steps` keeps each
migration's revision, the one before it and whether it is expand-only (`expand_only` in each
revision's module: the code of the revision before runs on the schema after it).
`migrations/env.py` writes a row after each step from this one on. A process that finds the
database at a revision it does not know reads there whether that revision is one expand-only
step past its own head: then it serves, with a warning, instead of refusing.

Revision ID: 0013_schema_steps
Revises: 0012_command_origins
Create Date: 2026-12-07 17:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013_schema_steps"
down_revision: str | Sequence[str] | None = "0012_command_origins"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None
# A new table alone: the code before it never reads it.
expand_only: bool = True


def upgrade() -> None:
    op.create_table(
        "schema_steps",
        sa.Column("revision", sa.String(length=64), nullable=False),
        sa.Column("down_revision", sa.String(length=64), nullable=True),
        sa.Column("expand_only", sa.Boolean(), nullable=False),
        sa.Column("applied_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("revision", name=op.f("pk_schema_steps")),
    )


def downgrade() -> None:
    op.drop_table("schema_steps")
