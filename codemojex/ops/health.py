"""Health: the probes of /healthz and /readyz, and the schema check bot and worker start with.

The database is ready when it answers and its Alembic revision is the latest this code
knows (the head of migrations/), or one expand-only step past it (a newer version migrated
first: this one serves on, with a warning, during a rolling upgrade). A worker on an older
schema fails on its first guess with a 637-line traceback, so it is refused at start with
one line instead (`schema_state`).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, select, text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from codemojex.db.engine import alembic_config
from codemojex.db.models import SchemaStep
from codemojex.db.reading import reading
from codemojex.limits import RETRIES
from codemojex.outages import Component, outage_of, retrying
from codemojex.runtime import PROBE_TIMEOUT_S
from codemojex.values.redistypes import AnyRedis

NOT_AT_HEAD: Final = "the database is not at the latest schema: run `codemojex migrate`"
NEWER: Final = "is newer than this version of Codemojex knows: upgrade Codemojex"
# How far ahead of this version's head an older process serves: one step, expand-only (its
# migration says the code before it runs on the schema after it: migrations/env.py records it).
EXPAND_STEPS_MAX: Final = 1


@dataclass(frozen=True)
class Schema:
    """Whether this version serves the database's schema: `problem` when it cannot (one
    line), `warning` when it serves one a step ahead of it."""

    problem: str | None = None
    warning: str | None = None


@functools.cache
def head_revisions() -> frozenset[str]:
    """The latest revision(s) of migrations/ (read once: the files do not change)."""
    return frozenset(ScriptDirectory.from_config(alembic_config()).get_heads())


@functools.cache
def known_revisions() -> frozenset[str]:
    return frozenset(
        rev.revision for rev in ScriptDirectory.from_config(alembic_config()).walk_revisions()
    )


def _current(connection: Connection) -> frozenset[str]:
    return frozenset(MigrationContext.configure(connection).get_current_heads())


def _steps(connection: Connection) -> dict[str, tuple[str | None, bool]]:
    """The steps migrations/env.py recorded: revision -> (the revision before, expand-only)."""
    rows = connection.execute(
        select(SchemaStep.revision, SchemaStep.down_revision, SchemaStep.expand_only)
    )
    return {revision: (down, bool(expand)) for revision, down, expand in rows}


def _ahead(current: frozenset[str], steps: dict[str, tuple[str | None, bool]]) -> list[str] | None:
    """The steps from this version's head up to the database's revision, when the database
    is on the same line ahead of it (None: it is not, or a step was never recorded)."""
    if len(current) != 1:
        return None
    (revision,) = current
    chain: list[str] = []
    while revision not in head_revisions():
        if revision not in steps or len(chain) > EXPAND_STEPS_MAX:
            return None
        chain.append(revision)
        down = steps[revision][0]
        if down is None:
            return None
        revision = down
    return chain


async def schema_state(engine: AsyncEngine) -> Schema:
    """Whether this version serves the database's schema (`Schema`). Raises what reaching
    the database raises (an outage is the caller's to wait out)."""
    async with engine.connect() as conn:
        current = await conn.run_sync(_current)
        if current == head_revisions():
            return Schema()
        unknown = sorted(current - known_revisions())
        if not unknown:
            return Schema(problem=NOT_AT_HEAD)
        steps = await conn.run_sync(_steps) if await conn.run_sync(_has_steps) else {}
    chain = _ahead(current, steps)
    names = ", ".join(unknown)
    if chain and len(chain) <= EXPAND_STEPS_MAX and all(steps[rev][1] for rev in chain):
        return Schema(
            warning=f"the database's schema ({names}) is one expand-only step ahead of this "
            "version: serving on it; upgrade Codemojex"
        )
    return Schema(problem=f"the database's schema ({names}) {NEWER}")


def _has_steps(connection: Connection) -> bool:
    return inspect(connection).has_table(SchemaStep.__tablename__)


async def wait_for_schema(
    engine: AsyncEngine,
    *,
    stop: asyncio.Event | None = None,
    waiting: dict[str, str] | None = None,
) -> Schema:
    """At start-up: wait out an outage of the database (one line when it starts, one when it
    ends; `waiting["postgres"]` says what is waited for meanwhile, for /readyz), then say
    whether its schema will do. A failure that is no outage (a role that does not exist) is
    raised; `stop` set ends the wait (OutageLasted)."""
    shown = waiting if waiting is not None else {}
    shown["postgres"] = "waiting for Postgres to answer (start-up)"

    def note(exc: BaseException) -> None:
        first = str(exc).splitlines()[0] if str(exc) else ""
        shown["postgres"] = f"waiting for Postgres (start-up): {type(exc).__name__}: {first}"

    state = await retrying(
        "postgres", RETRIES.loop, where="the start-up schema check", stop=stop, on_failure=note
    )(schema_state)(engine)
    shown.pop("postgres", None)
    return state


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


async def readiness(redis: AnyRedis, engine: AsyncEngine) -> tuple[dict[str, str], dict[str, str]]:
    """What keeps this process from being ready, {"redis" | "postgres": why} ({} = ready),
    and what it serves despite ({"postgres": a schema a step ahead}). Each probe is bounded
    by PROBE_TIMEOUT_S, so a probe never hangs on a dead server."""

    async def redis_problem() -> Schema:
        await redis.ping()
        return Schema()

    checks = {"redis": redis_problem(), "postgres": schema_state(engine)}
    problems: dict[str, str] = {}
    warnings: dict[str, str] = {}
    results = await asyncio.gather(
        *(asyncio.wait_for(check, PROBE_TIMEOUT_S) for check in checks.values()),
        return_exceptions=True,
    )
    for name, result in zip(checks, results, strict=True):
        if isinstance(result, TimeoutError):
            problems[name] = f"no answer within {PROBE_TIMEOUT_S:g} s"
        elif isinstance(result, BaseException):
            kind = "unreachable" if outage_of(result) else "failing"
            problems[name] = f"{kind}: {type(result).__name__}"
        elif result.problem is not None:
            problems[name] = result.problem
        elif result.warning is not None:
            warnings[name] = result.warning
    return problems, warnings
