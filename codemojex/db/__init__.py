"""The database: typed models, engine and session helpers, migrations, the store (`.store`), the
unit of work a use-case writes in (`unit.py`) and the transaction a reader reads in
(`reading.py`)."""

from codemojex.db.engine import make_engine, make_sessionmaker, upgrade
from codemojex.db.models import (
    AuditLog,
    Ban,
    Base,
    DailyPuzzle,
    DailyRecord,
    DailyResult,
    Guess,
    LeaderboardEntry,
    Outbox,
    Player,
    Room,
    Round,
)
from codemojex.db.reading import reading

__all__ = [
    "AuditLog",
    "Ban",
    "Base",
    "DailyPuzzle",
    "DailyRecord",
    "DailyResult",
    "Guess",
    "LeaderboardEntry",
    "Outbox",
    "Player",
    "Room",
    "Round",
    "make_engine",
    "make_sessionmaker",
    "reading",
    "upgrade",
]
