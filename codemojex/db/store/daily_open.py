"""Opening a player's daily in their private chat, as the store sees it: LOOK at what the
player has (the chat's room and its card, the player, today's puzzle, result and record), then
OPEN (the room and player if new, the chat's language, the round, the result row, the puzzle's
outbox row), in the caller's transaction (`codemojex.usecases.daily.open_daily` opens it,
decides in between, commits). `/daily` used to take four transactions and some twenty
statements through the ORM; this takes one, and on Postgres two fixed statements.

One interface, `Opening`, one implementation per database, as for a batch of guesses
(`batch.py`): `PG` (fixed statements, so asyncpg prepares each once per connection; the round's
id reserved by the look, so that the puzzle's keyboard, which names it, goes into the same
write) and `PORTABLE` (SQLite, the embedded demo: portable Core statements, the round's id
given by its insert). `opening(conn)` picks the connection's.

Why it is safe, the same as before it was one transaction: the day's puzzle is drawn once
(`daily.insert_puzzle`, by the caller when the look finds none); one open round per room and
one result per player and day are the database's unique keys, so of two opens of the same
daily at once one fails with IntegrityError (the caller rolls back and reads the winner's); a
room created at once by two opens makes the loser's rows miss their room (IntegrityError too,
a foreign key): the winner committed the room with its daily, in one transaction.

The look also returns what the chat's card in Redis is written from (`RoomCard`, as
`rooms.room_card` reads it), so the bot writes the card with no read of its own: the card of
the room as this transaction left it.
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncConnection

from codemojex.db.store.daily_open_common import NewDaily, Opening, PrivateChat, Seen
from codemojex.db.store.daily_open_pg import PG
from codemojex.db.store.daily_open_portable import PORTABLE

__all__ = ["PG", "PORTABLE", "NewDaily", "Opening", "PrivateChat", "Seen", "opening"]


def opening(conn: AsyncConnection) -> Opening:
    """The connection's database's way."""
    return PG if conn.dialect.name == "postgresql" else PORTABLE
