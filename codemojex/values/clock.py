"""The game's clock: the time, aware and in UTC, wherever Codemojex asks for "now".

Components that judge time (the bot, the worker, the ops page) take a `clock` argument that
defaults to `utcnow`, so that the tests can move it (over a midnight, past a deadline)."""

from __future__ import annotations

from datetime import UTC, datetime


def utcnow() -> datetime:
    return datetime.now(UTC)
