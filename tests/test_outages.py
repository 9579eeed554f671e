"""The one outage classifier (codemojex.outages) shared by the worker, the sender and the bot."""

from __future__ import annotations

import asyncpg
import pytest
import redis.exceptions
from sqlalchemy import exc as sa_exc

from codemojex.outages import is_outage, outage_of


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
        ConnectionRefusedError(),
        TimeoutError(),
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


def test_redis_outages_are_outages_for_the_bot() -> None:
    for exc in (
        redis.exceptions.ConnectionError("refused"),
        redis.exceptions.BusyLoadingError("loading"),
        redis.exceptions.OutOfMemoryError("OOM command not allowed"),
    ):
        assert is_outage(exc)
        assert outage_of(exc) == "redis"
