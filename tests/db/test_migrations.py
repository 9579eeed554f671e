"""The Alembic history and the models agree, and `upgrade` is safe to run again."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from codemojex.db import Base, upgrade
from codemojex.db.engine import alembic_config
from tests.conftest import _admin


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


# --- 0002: the repeats setting -------------------------------------------------------------------

_ROOM_0001 = (
    "INSERT INTO rooms (id, chat_id, title, length, palette, palette_size, ceiling, "
    "round_timeout_s, created) VALUES ('ROM01', -5, 'old', 4, NULL, 6, 2, 600, :t)"
)
_ROUND_0001 = (
    "INSERT INTO rounds (id, room_id, secret, palette, length, started_at, expires_at) "
    "VALUES (1, 'ROM01', '🍎🍎🍌🍇', '🍎🍌🍇🍒🍋🥝', 4, :t, :t)"
)


async def _sql(url: str, *statements: str) -> list[Any]:
    """Run statements in one transaction on a plain engine; the rows of the last one."""
    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            result = None
            for statement in statements:
                result = await conn.execute(sa.text(statement), {"t": datetime.now(UTC)})
            return list(result.all()) if result is not None and result.returns_rows else []
    finally:
        await engine.dispose()


def _repeats_migration_keeps_existing_rows(url: str) -> None:
    from alembic import command

    config = alembic_config(url)
    upgrade(url, "0001")
    asyncio.run(_sql(url, _ROOM_0001, _ROUND_0001))
    upgrade(url)  # 0002: existing rows get repeats = true
    rows = asyncio.run(
        _sql(url, "SELECT r.repeats, n.repeats FROM rooms r JOIN rounds n ON n.room_id = r.id")
    )
    assert [tuple(bool(v) for v in row) for row in rows] == [(True, True)]
    # New rows without the column get the server default too.
    asyncio.run(_sql(url, _ROOM_0001.replace("'ROM01', -5", "'ROM02', -6")))
    rows = asyncio.run(_sql(url, "SELECT repeats FROM rooms WHERE id = 'ROM02'"))
    assert [bool(row[0]) for row in rows] == [True]
    command.downgrade(config, "0001")
    rows = asyncio.run(_sql(url, "SELECT id FROM rooms ORDER BY id"))
    assert [row[0] for row in rows] == ["ROM01", "ROM02"]  # the data outlives the round trip
    upgrade(url)
    rows = asyncio.run(_sql(url, "SELECT repeats FROM rounds"))
    assert [bool(row[0]) for row in rows] == [True]


def test_repeats_migration_on_sqlite(tmp_path: Path) -> None:
    _repeats_migration_keeps_existing_rows(f"sqlite+aiosqlite:///{tmp_path / 'old.db'}")


def test_repeats_migration_on_postgres(pg_database_url: str) -> None:
    """On a database of its own (created and dropped here): the session's is at head."""
    name = "cmtest_mig_" + uuid.uuid4().hex[:10]
    asyncio.run(_admin(f'CREATE DATABASE "{name}"'))
    try:
        _repeats_migration_keeps_existing_rows(f"{pg_database_url.rsplit('/', 1)[0]}/{name}")
    finally:
        asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


# --- 0004: hardening --------------------------------------------------------------------------


def test_stored_names_lose_their_bidi_controls_on_sqlite(tmp_path: Path) -> None:
    """Names the bot stored before it stripped bidi controls are cleaned by the migration."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'names.db'}"
    upgrade(url, "0002")
    player = (
        "INSERT INTO players (id, room_id, tg_user_id, display_name, created) "
        "VALUES ('{id}', 'ROM01', {tg}, '{name}', :t)"
    )
    asyncio.run(
        _sql(
            url,
            _ROOM_0001,
            player.format(id="PLR01", tg=1, name="Eve\u202egnp.exe"),
            player.format(id="PLR02", tg=2, name="\u2067\u200f"),
            player.format(id="PLR03", tg=3, name="Ann \u2068B\u2069 C"),
            player.format(id="PLR04", tg=4, name="plain"),
        )
    )
    upgrade(url)
    rows = asyncio.run(_sql(url, "SELECT id, display_name FROM players ORDER BY id"))
    assert [tuple(row) for row in rows] == [
        ("PLR01", "Evegnp.exe"),
        ("PLR02", "player 2"),
        ("PLR03", "Ann B C"),
        ("PLR04", "plain"),
    ]


# --- 0012: command origins ----------------------------------------------------------------------

_AUDIT_0011 = (
    "INSERT INTO audit_log (room_id, actor_tg_id, action, args, allowed, at) "
    "VALUES ('ROM01', 7, 'ban', '', true, :t)"
)
_PLAYER_0011 = (
    "INSERT INTO players (id, room_id, tg_user_id, display_name, created) "
    "VALUES ('PLR01', 'ROM01', 7, 'Ann', :t)"
)


def _origins_migration_keeps_existing_rows(url: str) -> None:
    """Rows from before get none of the new values (no origin, not paused, no weight), the
    unique indexes refuse a second row of one message and let any number without one be."""
    from alembic import command

    upgrade(url, "0011_outbox_round")
    asyncio.run(_sql(url, _ROOM_0001, _ROUND_0001, _PLAYER_0011, _AUDIT_0011))
    upgrade(url)
    rows = asyncio.run(
        _sql(
            url,
            "SELECT r.paused, n.origin_chat_id, n.origin_message_id, p.weight, a.message_id "
            "FROM rooms r JOIN rounds n ON n.room_id = r.id JOIN players p ON p.room_id = r.id "
            "JOIN audit_log a ON a.room_id = r.id",
        )
    )
    assert [(bool(row[0]), *row[1:]) for row in rows] == [(False, None, None, None, None)]
    with_message = _AUDIT_0011.replace("at)", "at, chat_id, message_id)").replace(
        ":t)", ":t, -5, 9)"
    )
    asyncio.run(_sql(url, _AUDIT_0011, with_message))  # a second row with no message: fine
    with pytest.raises(sa.exc.IntegrityError):
        asyncio.run(_sql(url, with_message))
    # A second round (ended: one open round per room) opened by the same message: refused.
    ended = (
        "INSERT INTO rounds (id, room_id, secret, palette, length, started_at, expires_at, "
        "ended_at, origin_chat_id, origin_message_id) VALUES (2, 'ROM01', '🍎🍎🍌🍇', "
        "'🍎🍌🍇🍒🍋🥝', 4, :t, :t, :t, -5, {message})"
    )
    asyncio.run(_sql(url, ended.format(message=9)))
    with pytest.raises(sa.exc.IntegrityError):
        asyncio.run(_sql(url, "UPDATE rounds SET origin_chat_id = -5, origin_message_id = 9"))
    command.downgrade(alembic_config(url), "0011_outbox_round")
    rows = asyncio.run(_sql(url, "SELECT count(*) FROM audit_log"))
    assert [tuple(row) for row in rows] == [(3,)]  # the data outlives the round trip
    upgrade(url)


def test_origins_migration_on_sqlite(tmp_path: Path) -> None:
    _origins_migration_keeps_existing_rows(f"sqlite+aiosqlite:///{tmp_path / 'old.db'}")


def test_origins_migration_on_postgres(pg_database_url: str) -> None:
    """On a database of its own (created and dropped here): the session's is at head."""
    name = "cmtest_mig_" + uuid.uuid4().hex[:10]
    asyncio.run(_admin(f'CREATE DATABASE "{name}"'))
    try:
        _origins_migration_keeps_existing_rows(f"{pg_database_url.rsplit('/', 1)[0]}/{name}")
    finally:
        asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
