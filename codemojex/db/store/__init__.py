"""The store: loads, locks and writes rows; it never calls the game (`codemojex.game` decides,
`codemojex.usecases` joins the two in the transactions they open) and never commits (the unit
of work does, `codemojex/db/unit.py`).

Two kinds of module:

- reads: `lookups` (rooms, players, a room's card, its open round, the rounds due, the outbox,
  bans), `stats` (leaderboards and records), `daily_boards` (the daily code's boards and
  records), `ops` (what operators read). The processes read with these, each read in a
  transaction of its own that writes nothing (`unit.reading`); they are re-exported here:
  `store.leaderboard(...)`.
- writes, parts of a use-case's transaction: `rooms` (rooms and players, a room's settings),
  `rounds`, `outbox`, `admin` (bans, the audit log), `daily` (the daily code's rows), and what
  differs by database: `backend` (the abstract backend: recording a batch of guesses, opening a
  daily), `postgres` and `postgres_sql`, `sqlite`, with `rows` (what the rows read mean, for
  both). Not re-exported: the bot, the worker and the ops page write through
  `codemojex.usecases` only (an import-linter contract, `pyproject.toml`, holds them to it).

`seats` is the value a guess job names its player by; `errors` the store's refusals.
"""

from codemojex.db.store.daily_boards import (
    DailyEntry,
    MemberDaily,
    daily_entries,
    daily_names,
    daily_record,
    group_dailies,
)
from codemojex.db.store.errors import (
    CommandRepeated,
    RoundAlreadyOpen,
    SettingOutOfRange,
    StoreError,
    UnknownPlayer,
    UnknownRoom,
)
from codemojex.db.store.lookups import (
    DueRound,
    RoomCard,
    chats_with_unsent,
    claims_end,
    due_rounds,
    get_player,
    get_room,
    is_banned,
    next_expiry,
    open_round,
    pending_outbox,
    room_by_chat,
    room_card,
    room_chats,
)
from codemojex.db.store.seats import Seat
from codemojex.db.store.stats import (
    GlobalStats,
    LeaderRow,
    PlayerStats,
    WeekRow,
    global_stats,
    leaderboard,
    player_stats,
    week_start,
    weekly_board,
)

__all__ = [
    "CommandRepeated",
    "DailyEntry",
    "DueRound",
    "GlobalStats",
    "LeaderRow",
    "MemberDaily",
    "PlayerStats",
    "RoomCard",
    "RoundAlreadyOpen",
    "Seat",
    "SettingOutOfRange",
    "StoreError",
    "UnknownPlayer",
    "UnknownRoom",
    "WeekRow",
    "chats_with_unsent",
    "claims_end",
    "daily_entries",
    "daily_names",
    "daily_record",
    "due_rounds",
    "get_player",
    "get_room",
    "global_stats",
    "group_dailies",
    "is_banned",
    "leaderboard",
    "next_expiry",
    "open_round",
    "pending_outbox",
    "player_stats",
    "room_by_chat",
    "room_card",
    "room_chats",
    "week_start",
    "weekly_board",
]
