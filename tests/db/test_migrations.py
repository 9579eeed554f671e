"""The Alembic history and the models agree, and `upgrade` is safe to run again."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.ext.asyncio import AsyncEngine

from codemojex.db import Base, upgrade
from codemojex.db.engine import alembic_config


async def _diff(engine: AsyncEngine, metadata: sa.MetaData) -> list[Any]:
    async with engine.connect() as conn:
        return await conn.run_sync(
            lambda sync: compare_metadata(
                MigrationContext.configure(sync, opts={"compare_type": True}), metadata
            )
        )


async def test_head_matches_models_on_postgres(pg_engine: AsyncEngine) -> None:
    assert await _diff(pg_engine, Base.metadata) == []


async def test_comparison_sees_a_difference(pg_engine: AsyncEngine) -> None:
    # The check above could not pass by accident: a model change is noticed.
    changed = sa.MetaData(naming_convention=Base.metadata.naming_convention)
    for table in Base.metadata.tables.values():
        table.to_metadata(changed)
    changed.tables["rooms"].append_column(sa.Column("extra", sa.Integer(), nullable=True))
    diff = await _diff(pg_engine, changed)
    assert [d[0] for d in diff] == ["add_column"]
    assert diff[0][3].name == "extra"


async def test_database_is_at_head(pg_engine: AsyncEngine) -> None:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    async with pg_engine.connect() as conn:
        current = await conn.run_sync(
            lambda sync: MigrationContext.configure(sync).get_current_revision()
        )
    assert head is not None
    assert current == head


def test_downgrade_and_upgrade_round_trip(sqlite_url: str) -> None:
    from alembic import command

    config = alembic_config(sqlite_url)
    command.downgrade(config, "base")
    upgrade(sqlite_url)
    upgrade(sqlite_url)


def test_upgrade_again_is_a_no_op(migrated_pg_url: str) -> None:
    upgrade(migrated_pg_url)


async def test_one_open_round_index_is_partial(pg_engine: AsyncEngine) -> None:
    async with pg_engine.connect() as conn:
        indexdef = (
            await conn.execute(
                sa.text("SELECT indexdef FROM pg_indexes WHERE indexname = 'uq_rounds_one_open'")
            )
        ).scalar_one()
    assert "UNIQUE" in indexdef
    assert "WHERE (ended_at IS NULL)" in indexdef


async def test_head_matches_models_on_sqlite(sqlite_url: str) -> None:
    from codemojex.db import make_engine

    engine = make_engine(sqlite_url)
    try:
        assert await _diff(engine, Base.metadata) == []
    finally:
        await engine.dispose()
