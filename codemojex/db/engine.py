"""Engines, sessions and migrations, and the one place that asks which database a URL names.

Each engine carries its database's store backend (`store.backend.Backend`: `Postgres` or
`Sqlite`), picked here once when it is built, as an execution option every connection of it
inherits: the use-cases ask for it in their unit of work (`backend_of(tx.conn)`), and nothing
else asks.

SQLite (the embedded demo default) gets the settings that let several connections of one
process share a file without "database is locked": WAL, a busy timeout, foreign keys on, and
every transaction begun with BEGIN IMMEDIATE so writers queue up instead of deadlocking when a
reader upgrades to a writer; a transaction marked READ_ONLY (it never writes) begins
DEFERRED and so never queues behind the writers.

Postgres gets bounds, so that a held lock or a dead connection costs seconds, never hours
(the `DB_*` constants below, measured in docs/benchmarks.md, "Statement times"): every session
of the bot, the worker and the ops page has a `lock_timeout`, a `statement_timeout` and an
`idle_in_transaction_session_timeout` (a client that stopped mid-transaction, its process
frozen or its host gone, gives its row locks back), TCP keepalives on the server's side of
the socket, a connect timeout, and asyncpg's own `command_timeout` a margin past the
statement's (a server that stopped answering sends no timeout of its own). A statement cut by
one of them is a Postgres outage to `outages.py`: the caller waits and tries again, as for any
other. The retention trims mark their transactions MAINTENANCE: they run under bounds of their
own (`SET LOCAL`), and the migrations (`make_migration_engine`) under none.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path
from typing import Annotated, Any, Final

from pydantic import Field
from sqlalchemy import event
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.ext.asyncio import (
    AsyncConnection,
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.pool import NullPool

from codemojex.db.store.backend import Backend
from codemojex.db.store.postgres import Postgres
from codemojex.db.store.sqlite import Sqlite
from codemojex.db.unit import MAINTENANCE
from codemojex.values.bounds import within

# Database connections a process keeps (CODEMOJEX_DB_POOL_SIZE), and opens beyond them for a
# burst (CODEMOJEX_DB_POOL_OVERFLOW): work queues rather than churning connections. Every
# process of a deployment takes its share of Postgres's max_connections (100 by default): a
# process holds at most the sum, the worker too (its flushes' one of its own comes out of
# its pool: worker/service.py FLUSH_CONNECTIONS), the bot at most its updates handled at once.
# docs/operations.md, "Connections", gives the totals and when to put PgBouncer in front.
PoolSize = Annotated[int, Field(ge=1, le=1000)]
PoolOverflow = Annotated[int, Field(ge=0, le=1000)]
DB_POOL_SIZE: Final = 16
DB_POOL_OVERFLOW: Final = 4
# A pooled connection is replaced (none is pinged) before an idle timeout can cut it.
DB_POOL_RECYCLE_S: Final = 600
# Every Postgres session of bot, worker and ops page. The longest hot-path transaction and
# lock holder, record_guesses, took 169 ms at full load, its statements 145 ms
# (docs/benchmarks.md, "Statement times"): a lock is waited for 18 times that, a statement
# runs 34 times; past them a Postgres outage, tried again (outages.py).
DB_LOCK_TIMEOUT_MS: Final = 3_000
DB_STATEMENT_TIMEOUT_MS: Final = 5_000
# A client frozen or gone mid-transaction gives its locks back after this (not the two hours
# of TCP keepalive): ours wait on nothing but the database and a bounded Redis call.
DB_IDLE_IN_TRANSACTION_MS: Final = 10_000
# Server keepalive (idle, interval, count), connecting, asyncpg's bound past the statement
# timeouts (a hung server sends none); the trims' own bounds (`SET LOCAL`; migrations none).
DB_KEEPALIVE: Final = (10, 5, 3)
DB_CONNECT_TIMEOUT_S: Final = 5.0
DB_COMMAND_MARGIN_S: Final = 5.0
DB_MAINTENANCE_STATEMENT_TIMEOUT_MS: Final = 20_000
DB_MAINTENANCE_LOCK_TIMEOUT_MS: Final = 10_000
# SQLite (the embedded demo): a writer waits this long for the write lock.
SQLITE_BUSY_TIMEOUT_S: Final = 30.0


def _migrations_dir() -> Path:
    """The repository root's migrations/, installed inside the package as
    `codemojex.migrations` (setup.py): in a wheel's install and in an editable one alike. A
    checkout run from its own path without being installed finds it beside the package."""
    try:
        return Path(str(files("codemojex.migrations")))
    except ModuleNotFoundError:
        return Path(__file__).resolve().parents[2] / "migrations"


MIGRATIONS_DIR = _migrations_dir()


# An execution option a read sets on its transaction (`unit.reading`): on SQLite it begins
# DEFERRED instead of IMMEDIATE (in WAL mode a reader takes no lock, so it neither waits for
# the writers nor holds them up). Postgres ignores it.
READ_ONLY = "codemojex_read_only"

# The execution option that carries an engine's store backend (`backend_of`).
BACKEND = "codemojex_backend"

# The databases Codemojex runs on, by the name a URL gives its dialect.
_BACKENDS: dict[str, type[Backend]] = {"postgresql": Postgres, "sqlite": Sqlite}


def backend_of(conn: AsyncConnection) -> Backend:
    """The store backend of the engine `conn` belongs to (picked by `make_engine`)."""
    options = conn.sync_connection.get_execution_options() if conn.sync_connection else {}
    backend = options.get(BACKEND)
    if not isinstance(backend, Backend):
        raise RuntimeError("an engine not made by codemojex.db.make_engine has no store backend")
    return backend


def postgres_session(
    *,
    lock_timeout_ms: int = DB_LOCK_TIMEOUT_MS,
    statement_timeout_ms: int = DB_STATEMENT_TIMEOUT_MS,
    idle_in_transaction_ms: int = DB_IDLE_IN_TRANSACTION_MS,
) -> dict[str, Any]:
    """asyncpg's connect arguments for a session of ours (the module's doc says why each): 0
    turns a timeout off."""
    command_timeout = (
        max(statement_timeout_ms, DB_MAINTENANCE_STATEMENT_TIMEOUT_MS) / 1000 + DB_COMMAND_MARGIN_S
    )
    return {
        "timeout": DB_CONNECT_TIMEOUT_S,
        "command_timeout": command_timeout if statement_timeout_ms else None,
        "server_settings": {
            "lock_timeout": str(lock_timeout_ms),
            "statement_timeout": str(statement_timeout_ms),
            "idle_in_transaction_session_timeout": str(idle_in_transaction_ms),
            **{
                f"tcp_keepalives_{name}": str(value)
                for name, value in zip(("idle", "interval", "count"), DB_KEEPALIVE, strict=True)
            },
        },
    }


def make_engine(
    url: str | URL,
    *,
    pool_size: int | None = None,
    pool_overflow: int = DB_POOL_OVERFLOW,
    **kwargs: Any,
) -> AsyncEngine:
    """An async engine for `url` (postgresql+asyncpg://… or sqlite+aiosqlite://…), with its
    database's store backend.

    Statement parameters are hidden from error messages and logs: they include secret codes.
    On Postgres, `pool_size` connections are kept (`DB_POOL_SIZE` by default, not
    SQLAlchemy's 5: a process that runs N use-cases at once and keeps fewer opens and closes
    connections as it goes) with `pool_overflow` more for a burst, and no connection is pinged
    before each use: that is a round trip per checkout. A connection that was dropped (Postgres
    restarted, a proxy cut it) fails its next statement instead, which `outages` takes for a
    Postgres outage: the caller says "try again" or retries, and SQLAlchemy invalidates the
    pool's connections of before the failure at once. Connections are replaced after
    `DB_POOL_RECYCLE_S`, before an idle timeout on the way can cut them.
    """
    name = make_url(url).get_backend_name()
    if name not in _BACKENDS:
        raise ValueError(f"Codemojex runs on Postgres or SQLite, not {name!r}")
    backend = _BACKENDS[name]()
    kwargs.setdefault("hide_parameters", True)
    kwargs["execution_options"] = {**kwargs.get("execution_options", {}), BACKEND: backend}
    if not isinstance(backend, Sqlite):
        kwargs.setdefault("pool_pre_ping", False)
        kwargs.setdefault("pool_recycle", DB_POOL_RECYCLE_S)
        size = DB_POOL_SIZE if pool_size is None else within(pool_size, PoolSize, "pool_size")
        kwargs.setdefault("pool_size", size)
        kwargs.setdefault("max_overflow", within(pool_overflow, PoolOverflow, "pool_overflow"))
        given = kwargs.get("connect_args", {})
        session = postgres_session()
        kwargs["connect_args"] = {
            **session,
            **given,
            "server_settings": {**session["server_settings"], **given.get("server_settings", {})},
        }
        engine = create_async_engine(url, **kwargs)
        _postgres_maintenance(engine)
        return engine
    connect_args = dict(kwargs.pop("connect_args", {}))
    connect_args.setdefault("timeout", SQLITE_BUSY_TIMEOUT_S)
    engine = create_async_engine(url, connect_args=connect_args, **kwargs)
    _sqlite_serialised_writers(engine)
    return engine


def _postgres_maintenance(engine: AsyncEngine) -> None:
    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn: Connection) -> None:
        if conn.get_execution_options().get(MAINTENANCE, False):
            # Transaction-local: the connection goes back to the pool with the hot path's.
            conn.exec_driver_sql(
                "SELECT set_config('statement_timeout', $1, true),"
                " set_config('lock_timeout', $2, true)",
                (
                    str(DB_MAINTENANCE_STATEMENT_TIMEOUT_MS),
                    str(DB_MAINTENANCE_LOCK_TIMEOUT_MS),
                ),
            )


def make_migration_engine(url: str) -> AsyncEngine:
    """The engine the migrations run on (migrations/env.py): one connection, no pool, and on
    Postgres none of the hot path's statement, lock or idle timeouts (a migration rewriting a
    large table must not be cut half-way; it runs with the bot and workers stopped or
    waiting, as operations.md says); a connect timeout all the same."""
    kwargs: dict[str, Any] = {"poolclass": NullPool, "hide_parameters": True}
    if make_url(url).get_backend_name() == "postgresql":
        kwargs["connect_args"] = postgres_session(
            lock_timeout_ms=0, statement_timeout_ms=0, idle_in_transaction_ms=0
        )
    return create_async_engine(url, **kwargs)


def _sqlite_serialised_writers(engine: AsyncEngine) -> None:
    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Take transaction control from the driver so that "begin" below is what starts one.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute(f"PRAGMA busy_timeout={int(SQLITE_BUSY_TIMEOUT_S * 1000)}")
        finally:
            cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn: Connection) -> None:
        read_only = conn.get_execution_options().get(READ_ONLY, False)
        conn.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")


# Where a unit of work (`unit.uow`) and a read (`reading.reading`) take their session from.
Sessions = async_sessionmaker[AsyncSession]


def make_sessionmaker(engine: AsyncEngine) -> Sessions:
    # Objects stay readable after commit: use-cases commit and then return them.
    return async_sessionmaker(engine, expire_on_commit=False)


def own_pool(sessions: Sessions, size: int) -> Sessions:
    """Sessions on the same database as `sessions`, from a pool of exactly `size` connections
    of their own (no overflow): whoever takes them never waits behind the users of the first
    pool. Its engine is `sessions.kw["bind"]`, to dispose of when done."""
    engine = sessions.kw.get("bind")
    if not isinstance(engine, AsyncEngine):
        raise TypeError("sessions not bound to an engine")
    return make_sessionmaker(make_engine(engine.url, pool_size=size, max_overflow=0))


def alembic_config(url: str | None = None) -> Any:
    """An Alembic Config pointing at migrations/, with the database URL passed as an attribute."""
    from alembic.config import Config

    if not (MIGRATIONS_DIR / "env.py").is_file():
        raise FileNotFoundError(
            f"no Alembic migrations at {MIGRATIONS_DIR}: this install of codemojex is incomplete "
            "(reinstall it: pip install -c constraints.txt .)"
        )
    ini = MIGRATIONS_DIR.parent / "alembic.ini"
    config = Config(str(ini)) if ini.exists() else Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url is not None:
        config.attributes["url"] = url
    return config


def upgrade(url: str, revision: str = "head") -> None:
    """Run `alembic upgrade head` on `url`. Synchronous: never call it inside a running event
    loop (env.py runs its own); from async code use `await asyncio.to_thread(upgrade, url)`."""
    from alembic import command

    command.upgrade(alembic_config(url), revision)
