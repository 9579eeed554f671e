"""Which database failures are outages that go away by themselves (retry later) and which
are bugs (report them). One classifier for every caller: the worker retries a batch on an
outage, the sender waits, the bot asks the player to try again."""

from __future__ import annotations

from typing import Final

from sqlalchemy import exc as sa_exc

_TRANSIENT_SQLSTATES: Final = frozenset(
    {
        "40001",  # serialization_failure
        "40P01",  # deadlock_detected
        "55P03",  # lock_not_available
        "57P01",  # admin_shutdown
        "57P02",  # crash_shutdown
        "57P03",  # cannot_connect_now (starting up)
        "53300",  # too_many_connections
    }
)


def is_transient(exc: BaseException) -> bool:
    """True for failures that go away by themselves: the database is down, restarting,
    unreachable, too slow, or a transaction lost a serialization race."""
    if isinstance(exc, (OSError, TimeoutError, ConnectionError)):
        return True
    if isinstance(exc, sa_exc.DBAPIError):
        if exc.connection_invalidated:
            return True
        if isinstance(exc, (sa_exc.OperationalError, sa_exc.InterfaceError)):
            return True
        orig = exc.orig
        code = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
        if code in _TRANSIENT_SQLSTATES:
            return True
        # asyncpg's own connection errors arrive wrapped in the adapter's exceptions.
        cause: BaseException | None = orig
        while cause is not None:
            if isinstance(cause, (OSError, TimeoutError, ConnectionError)):
                return True
            name = type(cause).__name__
            if name in {
                "ConnectionDoesNotExistError",
                "CannotConnectNowError",
                "InterfaceError",
                "ConnectionFailureError",
                "TooManyConnectionsError",
            }:
                return True
            cause = cause.__cause__
    return isinstance(exc, (sa_exc.TimeoutError, sa_exc.DisconnectionError))
