"""The store: typed models, engine and session helpers, migrations (use-cases: `.store`)."""

from codemojex.db.engine import is_sqlite, make_engine, make_sessionmaker, upgrade
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
    "is_sqlite",
    "make_engine",
    "make_sessionmaker",
    "upgrade",
]
