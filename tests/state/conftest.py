"""The state tests share the worker tests' fixtures: Redis clients that drop the test's
`cmx:{q}:*` and `emq:{q}:*` keys, and the migrated Postgres (the daily board rebuilds from it,
a card reloads from it)."""

from __future__ import annotations

from tests.worker.conftest import redis_any, redis_r, sessionmaker, worker_pg_url

__all__ = ["redis_any", "redis_r", "sessionmaker", "worker_pg_url"]
