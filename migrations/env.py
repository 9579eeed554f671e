"""Alembic environment, async: the migrations run through an async engine with run_sync.

The URL, first found wins: the `url` attribute (set by `codemojex.db.upgrade(url)`),
`alembic -x url=...`, `sqlalchemy.url` in the ini, then `Settings().database_url`.
A caller may also hand over an open sync connection in the `connection` attribute.
"""

from __future__ import annotations

import asyncio
import logging.config
from collections.abc import Collection, Mapping
from typing import Any

import sqlalchemy as sa
from alembic import context
from alembic.runtime.migration import MigrationContext, MigrationInfo
from sqlalchemy.engine import Connection

from codemojex.db.engine import make_migration_engine
from codemojex.db.models import Base, SchemaStep
from codemojex.values.clock import utcnow

config = context.config
target_metadata = Base.metadata

# Only when run from the alembic CLI: an embedding program keeps its own logging.
if config.config_file_name is not None and config.attributes.get("url") is None:
    logging.config.fileConfig(config.config_file_name, disable_existing_loggers=False)


def _database_url() -> str:
    url = config.attributes.get("url")
    if url:
        return str(url)
    url = context.get_x_argument(as_dictionary=True).get("url")
    if url:
        return url
    url = config.get_main_option("sqlalchemy.url")
    if url:
        return url
    from codemojex.settings import load_settings

    return load_settings().database_url


def _record_step(
    ctx: MigrationContext,
    step: MigrationInfo,
    heads: Collection[Any],
    run_args: Mapping[str, Any],
) -> None:
    """After each step up, in its transaction: the revision, the one before it and whether
    it is expand-only, for the processes of older versions to read (SchemaStep). Steps from
    the table's own migration on."""
    if not step.is_upgrade or ctx.connection is None:
        return
    if not sa.inspect(ctx.connection).has_table(SchemaStep.__tablename__):
        return
    (revision,) = step.up_revision_ids
    # A Script, whose module is the revision's file (expand_only: its author's word).
    module = getattr(step.revision_map.get_revision(revision), "module", None)
    (down,) = step.down_revision_ids or (None,)
    ctx.connection.execute(
        sa.insert(SchemaStep).values(
            revision=revision,
            down_revision=down,
            expand_only=bool(getattr(module, "expand_only", False)),
            applied_at=utcnow(),
        )
    )


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        compare_type=True,
        # SQLite cannot ALTER most things: later revisions get batch mode for free.
        render_as_batch=connection.dialect.name == "sqlite",
        on_version_apply=_record_step,
    )


def _run_with(connection: Connection) -> None:
    _configure(connection)
    with context.begin_transaction():
        context.run_migrations()


async def _run_async(url: str) -> None:
    # Without the hot path's statement and lock timeouts (codemojex.db.engine says why).
    engine = make_migration_engine(url)
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_run_with)
            await connection.commit()
    finally:
        await engine.dispose()


def run_migrations_offline() -> None:
    context.configure(
        url=_database_url(),
        target_metadata=target_metadata,
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run_with(connection)
        return
    asyncio.run(_run_async(_database_url()))


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
