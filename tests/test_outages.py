"""The one outage classifier (codemojex.outages) shared by the worker, the sender and the bot.

A bare OSError or TimeoutError is an outage of the component whose client raised it, told by
where it came from: real failures of asyncpg, SQLAlchemy and redis-py (a refused connection,
a server that never answers, a timeout of ours around their await) are outages; the same
exception types from a file or a socket of our own are bugs."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import AsyncIterator

import asyncpg
import pytest
import redis.asyncio as aioredis
import redis.exceptions
from sqlalchemy import exc as sa_exc
from sqlalchemy import text

from codemojex.db import make_engine
from codemojex.outages import OutageLog, answered, is_outage, outage_of
from tests.helpers.support import free_port


def wrapped(orig: BaseException) -> sa_exc.DBAPIError:
    return sa_exc.DBAPIError("SELECT 1", {}, orig)


@pytest.mark.parametrize(
    "exc",
    [
        wrapped(asyncpg.exceptions.CannotConnectNowError("the database system is shutting down")),
        wrapped(asyncpg.exceptions.AdminShutdownError("terminating connection")),
        wrapped(asyncpg.exceptions.SerializationError("could not serialize access")),
        wrapped(asyncpg.exceptions.TooManyConnectionsError("too many clients")),
        sa_exc.OperationalError("SELECT 1", {}, OSError("connection refused")),
    ],
    ids=lambda exc: type(exc).__name__ + ":" + str(getattr(exc, "orig", exc))[:30],
)
def test_database_outages_are_outages_for_the_worker_and_the_bot(exc: BaseException) -> None:
    assert is_outage(exc)
    assert outage_of(exc) == "postgres"


@pytest.mark.parametrize(
    "exc",
    [
        wrapped(asyncpg.exceptions.UniqueViolationError("duplicate key")),
        wrapped(asyncpg.exceptions.UndefinedTableError("relation does not exist")),
        ValueError("a bug"),
        KeyError("a bug"),
    ],
    ids=lambda exc: type(exc).__name__,
)
def test_bugs_are_not_outages(exc: BaseException) -> None:
    assert not is_outage(exc)
    assert outage_of(exc) is None


@pytest.mark.parametrize(
    ("exc", "did_answer"),
    [
        (
            wrapped(asyncpg.exceptions.QueryCanceledError("statement timeout")),
            True,
        ),
        (wrapped(asyncpg.exceptions.LockNotAvailableError("canceling: lock timeout")), True),
        (wrapped(asyncpg.exceptions.SerializationError("could not serialize access")), True),
        (wrapped(asyncpg.exceptions.DeadlockDetectedError("deadlock detected")), True),
        (wrapped(asyncpg.exceptions.AdminShutdownError("terminating connection")), False),
        (sa_exc.OperationalError("SELECT 1", {}, OSError("connection refused")), False),
        (redis.exceptions.ConnectionError("refused"), False),
    ],
    ids=lambda value: type(value).__name__ if not isinstance(value, bool) else str(value),
)
def test_an_outage_where_the_database_answered_is_the_probes_to_judge(
    exc: BaseException, did_answer: bool
) -> None:
    """A statement or lock timeout, a lost race: Postgres answered. Still an outage to the
    classifier (the worker hands its batch back), but whether the database is down is its
    health probe's to say (`OutageLog.down`): the bot's budget of tries asks it."""
    assert outage_of(exc) is not None
    assert answered(exc) is did_answer


async def test_down_asks_the_probe_once_for_every_caller() -> None:
    log = OutageLog()
    calls = 0

    async def refused() -> None:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.05)
        raise redis.exceptions.ConnectionError("refused")

    async def answers() -> None:
        nonlocal calls
        calls += 1

    assert await asyncio.gather(*(log.down("redis", refused) for _ in range(50))) == [True] * 50
    assert calls == 1
    assert await log.down("redis", refused)  # its verdict stands a while
    assert calls == 1
    assert not await OutageLog().down("postgres", answers)
    bad = await OutageLog().down("postgres", lambda: asyncio.sleep(0, result=1 / 0))
    assert bad is False  # a probe that fails with a bug says nothing is down


def test_redis_outages_are_outages_for_the_bot() -> None:
    for exc in (
        redis.exceptions.ConnectionError("refused"),
        redis.exceptions.BusyLoadingError("loading"),
        redis.exceptions.OutOfMemoryError("OOM command not allowed"),
    ):
        assert is_outage(exc)
        assert outage_of(exc) == "redis"


def test_a_socket_error_nobody_raised_is_no_outage() -> None:
    """Built, never raised: no traceback says whose it is."""
    for exc in (ConnectionRefusedError(), TimeoutError(), OSError(5, "I/O error")):
        assert outage_of(exc) is None


@contextlib.asynccontextmanager
async def black_hole() -> AsyncIterator[int]:
    """A port that accepts connections and never says a word: a server that hangs."""
    held: list[asyncio.StreamWriter] = []

    async def hold(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        for writer in held:
            writer.close()
        server.close()
        await server.wait_closed()


async def raised(coro: object) -> BaseException:
    try:
        await coro  # type: ignore[misc]
    except Exception as exc:
        return exc
    raise AssertionError("it did not fail")


async def test_real_database_failures_are_postgres_outages() -> None:
    closed = free_port()
    refused = await raised(asyncpg.connect(f"postgresql://postgres@127.0.0.1:{closed}/x"))
    assert isinstance(refused, OSError)
    assert outage_of(refused) == "postgres"

    engine = make_engine(f"postgresql+asyncpg://postgres@127.0.0.1:{closed}/x")
    try:

        async def select_one() -> None:
            async with engine.connect() as conn:
                await conn.execute(text("SELECT 1"))

        assert outage_of(await raised(select_one())) == "postgres"
    finally:
        await engine.dispose()

    async with black_hole() as port:
        dsn = f"postgresql://postgres@127.0.0.1:{port}/x"
        hung = await raised(asyncpg.connect(dsn, timeout=0.3))
        assert isinstance(hung, TimeoutError) and outage_of(hung) == "postgres"

        async def ours_around_theirs() -> None:
            async with asyncio.timeout(0.3):  # a timeout of ours around asyncpg's await
                await asyncpg.connect(dsn, timeout=30)

        timed_out = await raised(ours_around_theirs())
        assert isinstance(timed_out, TimeoutError) and outage_of(timed_out) == "postgres"


async def test_a_redis_that_hangs_under_a_timeout_of_ours_is_a_redis_outage() -> None:
    async with black_hole() as port:
        client = aioredis.Redis(port=port, socket_connect_timeout=30, socket_timeout=30)
        try:

            async def ping() -> None:
                async with asyncio.timeout(0.3):
                    await client.ping()

            timed_out = await raised(ping())
            assert isinstance(timed_out, TimeoutError)
            assert outage_of(timed_out) == "redis"
        finally:
            await client.aclose()


async def test_a_file_or_socket_of_ours_is_a_bug_not_an_outage(tmp_path: object) -> None:
    """The same exception types as a database outage, from code of ours: reported."""

    async def read_missing_file() -> None:
        with open(os.path.join(str(tmp_path), "missing.txt")) as f:  # noqa: ASYNC230
            f.read()

    async def our_socket() -> None:
        with socket.create_connection(("127.0.0.1", free_port()), timeout=1):
            pass

    async def our_stream() -> None:
        await asyncio.open_connection("127.0.0.1", free_port())

    async def our_timeout() -> None:
        async with asyncio.timeout(0.05):
            await asyncio.sleep(1)

    async def bad_descriptor() -> None:
        os.read(-1, 1)

    for make in (read_missing_file, our_socket, our_stream, our_timeout, bad_descriptor):
        exc = await raised(make())
        assert isinstance(exc, OSError | TimeoutError), exc
        assert outage_of(exc) is None, (make.__name__, exc)
        assert not is_outage(exc)
