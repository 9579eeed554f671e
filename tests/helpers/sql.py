"""The SQL an engine sends, counted by the tests that hold a path to a number of statements."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine


@contextmanager
def statements(engine: AsyncEngine, *, transactions: bool = False) -> Iterator[list[str]]:
    """The SQL statements `engine` sends while in the block, in order; with `transactions`,
    its BEGINs and COMMITs among them (as "BEGIN" and "COMMIT")."""
    sync = engine.sync_engine
    sent: list[str] = []

    def on_statement(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        sent.append(statement)

    def on_begin(conn: Any) -> None:
        sent.append("BEGIN")

    def on_commit(conn: Any) -> None:
        sent.append("COMMIT")

    listeners: list[tuple[str, Callable[..., None]]] = [("before_cursor_execute", on_statement)]
    if transactions:
        listeners += [("begin", on_begin), ("commit", on_commit)]
    for name, listener in listeners:
        event.listen(sync, name, listener)
    try:
        yield sent
    finally:
        for name, listener in listeners:
            event.remove(sync, name, listener)


def verbs(sent: list[str]) -> list[str]:
    """Each statement's first word, upper-cased ("SELECT", "WITH", "BEGIN")."""
    return [statement.split(None, 1)[0].upper() for statement in sent]
