"""The use-cases against real Postgres migrated through Alembic (and SQLite, the embedded
default, where a test says so): the store tests' fixtures."""

from tests.db.conftest import (  # noqa: F401 (fixtures)
    migrated_pg_url,
    pg_engine,
    rng,
    session,
    sessions,
    sqlite_sessions,
    sqlite_url,
)
