"""Health: the probes of /healthz and /readyz, and the schema check bot and worker start with.

The database is ready when it answers and its Alembic revision is the latest this code
knows (the head of migrations/): a worker on an old schema fails on its first guess with a
637-line traceback, so it is refused at start with one line instead (`schema_problem`).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import Final

from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from codemojex.db.engine import alembic_config
from codemojex.db.reading import reading
from codemojex.limits import RETRIES
from codemojex.outages import Component, outage_of, retrying
from codemojex.runtime import PROBE_TIMEOUT_S
from codemojex.values.redistypes import AnyRedis

NOT_AT_HEAD: Final = "the database is not at the latest schema: run `codemojex migrate`"


@functools.cache
def head_revisions() -> frozenset[str]:
    """The latest revision(s) of migrations/ (read once: the files do not change)."""
    return frozenset(ScriptDirectory.from_config(alembic_config()).get_heads())


def _current(connection: Connection) -> frozenset[str]:
    return frozenset(MigrationContext.configure(connection).get_current_heads())


async def schema_problem(engine: AsyncEngine) -> str | None:
    """None when the database is at the head; else what is wrong, in one line. Raises what
    reaching the database raises (an outage is the caller's to wait out)."""
    async with engine.connect() as conn:
        current = await conn.run_sync(_current)
    heads = head_revisions()
    if current == heads:
        return None
    known = {rev.revision for rev in ScriptDirectory.from_config(alembic_config()).walk_revisions()}
    unknown = sorted(current - known)
    if unknown:
        return (
            f"the database's schema ({', '.join(unknown)}) is newer than this version of "
            "Codemojex knows: upgrade Codemojex"
        )
    return NOT_AT_HEAD


async def wait_for_schema(engine: AsyncEngine) -> str | None:
    """At start-up: wait out an outage of the database (one line when it starts, one when it
    ends), then say whether its schema will do (None) or why not."""
    try:
        return await retrying("postgres", RETRIES.loop, where="the start-up schema check")(
            schema_problem
        )(engine)
    except Exception as exc:
        first = str(exc).splitlines()[0] if str(exc) else ""
        return f"cannot read the database's schema: {type(exc).__name__}: {first}"


def probe_of(
    component: Component, redis: AnyRedis, sessionmaker: async_sessionmaker[AsyncSession]
) -> Callable[[], Awaitable[object]]:
    """The call that tells whether `component` answers (the bot's outage probe)."""
    if component == "redis":
        return redis.ping

    async def select_one() -> None:
        async with reading(sessionmaker) as session:
            await session.execute(text("SELECT 1"))

    return select_one


async def readiness(redis: AnyRedis, engine: AsyncEngine) -> dict[str, str]:
    """What keeps this process from being ready: {"redis" | "postgres": why}; {} = ready.
    Each probe is bounded by PROBE_TIMEOUT_S, so a probe never hangs on a dead server."""

    async def redis_problem() -> str | None:
        await redis.ping()
        return None

    checks = {"redis": redis_problem(), "postgres": schema_problem(engine)}
    out: dict[str, str] = {}
    results = await asyncio.gather(
        *(asyncio.wait_for(check, PROBE_TIMEOUT_S) for check in checks.values()),
        return_exceptions=True,
    )
    for name, result in zip(checks, results, strict=True):
        if isinstance(result, TimeoutError):
            out[name] = f"no answer within {PROBE_TIMEOUT_S:g} s"
        elif isinstance(result, BaseException):
            kind = "unreachable" if outage_of(result) else "failing"
            out[name] = f"{kind}: {type(result).__name__}"
        elif result is not None:
            out[name] = result
    return out
