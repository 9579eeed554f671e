"""`codemojex demo`: real rounds through the real bot and worker, on embedded defaults.

Everything runs in this one process: the Bot API stand-in (codemojex.standin) plays Telegram,
fakeredis plays Redis unless CODEMOJEX_REDIS_URL is set, and a throwaway SQLite file plays
Postgres unless CODEMOJEX_DATABASE_URL is set. Read it in this order: `people.py` (the rooms,
the players and what they read of the chats), `run.py` (starting the stack, playing,
settling), `report.py` (the books and the summary table). No other code imports any of it;
the parts worth sharing live in the stand-in and the runtime.
"""

from __future__ import annotations

from codemojex.demo.people import DemoPlan
from codemojex.demo.run import run_demo

__all__ = ["DemoPlan", "run_demo"]
