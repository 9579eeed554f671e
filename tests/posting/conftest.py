"""The posting tests share the worker tests' fixtures: Redis clients that drop the test's
`cmx:{q}:*` and `emq:{q}:*` keys, the migrated Postgres, the Bot API stand-in and a bot on it;
and a client of a Redis that is not there."""

from __future__ import annotations

from tests.worker.conftest import (
    bot,
    dead_sessionmaker,
    redis_any,
    redis_r,
    redis_rc,
    sessionmaker,
    standin,
    worker_pg_url,
)

__all__ = [
    "bot",
    "dead_sessionmaker",
    "redis_any",
    "redis_r",
    "redis_rc",
    "sessionmaker",
    "standin",
    "worker_pg_url",
]
