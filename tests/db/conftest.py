"""Store fixtures: the session's Postgres database migrated once to head, clean tables per test.

TRUNCATE runs inside this test session's own database (from `pg_database_url`), never in a
shared one.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from codemojex.db import make_engine, make_sessionmaker, upgrade
from tests.helpers.support import wipe_tables


@pytest.fixture(scope="session")
def migrated_pg_url(pg_database_url: str) -> str:
    # Sync fixture: Alembic's env.py runs its own event loop.
    upgrade(pg_database_url)
    return pg_database_url


@pytest.fixture
async def pg_engine(migrated_pg_url: str) -> AsyncIterator[AsyncEngine]:
    engine = make_engine(migrated_pg_url, pool_size=12, max_overflow=8)
    await wipe_tables(engine)
    try:
        yield engine
    finally:
        await engine.dispose()


@pytest.fixture
def sessions(pg_engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    return make_sessionmaker(pg_engine)


@pytest.fixture
async def session(sessions: async_sessionmaker[AsyncSession]) -> AsyncIterator[AsyncSession]:
    async with sessions() as s:
        yield s


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    url = f"sqlite+aiosqlite:///{tmp_path / 'codemojex.db'}"
    upgrade(url)
    return url


@pytest.fixture
async def sqlite_sessions(sqlite_url: str) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    engine = make_engine(sqlite_url)
    try:
        yield make_sessionmaker(engine)
    finally:
        await engine.dispose()


@pytest.fixture
def rng() -> random.Random:
    return random.Random(1234)
