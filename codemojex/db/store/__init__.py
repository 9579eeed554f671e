"""The store: loads, locks and writes rows; it never calls the game (`codemojex.game` decides,
`codemojex.usecases` joins the two in one transaction).

One module per kind of row: `rooms` (rooms, players, a room's settings and card), `rounds` (the
open round, a new round, a round locked to close, the due ones), `batch` (loading and writing a
batch of guesses: `batch_pg`, `batch_portable`), `seats` (the batch's players), `outbox` (what
the sender posts), `stats` (records), `admin` (bans, audit), `daily` (the daily code's puzzles,
results and records), `daily_open` (opening a daily, in one transaction). Callers use the
names re-exported here: `store.leaderboard(...)`.

Two kinds of function: parts of a transaction a use-case holds (in the modules, not re-exported
here: `rounds.locked_round`, `batch.batch_store`, `daily_open.opening`, …), which never
commit; and the rest, each committing (or rolling back) its own transaction, readers included:
on SQLite every
transaction holds the write lock (BEGIN IMMEDIATE, see `engine.py`), so none may be left open.
Objects returned stay readable after the commit (the session maker sets
expire_on_commit=False).
"""

from codemojex.db.store.admin import audit, ban, is_banned, trim_audit, unban
from codemojex.db.store.daily import (
    DailyEntry,
    MemberDaily,
    daily_entries,
    daily_names,
    daily_record,
    group_dailies,
    trim_daily,
)
from codemojex.db.store.errors import (
    RoundAlreadyOpen,
    SettingOutOfRange,
    StoreError,
    UnknownPlayer,
    UnknownRoom,
)
from codemojex.db.store.outbox import (
    chats_with_unsent,
    claim_outbox,
    mark_sent,
    pending_outbox,
    release_outbox,
    write_messages,
)
from codemojex.db.store.rooms import (
    RoomCard,
    ensure_player,
    ensure_room,
    get_player,
    get_room,
    room_by_chat,
    room_card,
    room_chats,
)
from codemojex.db.store.rounds import due_rounds, next_expiry, open_round
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
    "DailyEntry",
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
    "audit",
    "ban",
    "chats_with_unsent",
    "claim_outbox",
    "daily_entries",
    "daily_names",
    "daily_record",
    "due_rounds",
    "ensure_player",
    "ensure_room",
    "get_player",
    "get_room",
    "global_stats",
    "group_dailies",
    "is_banned",
    "leaderboard",
    "mark_sent",
    "next_expiry",
    "open_round",
    "pending_outbox",
    "player_stats",
    "release_outbox",
    "room_by_chat",
    "room_card",
    "room_chats",
    "trim_audit",
    "trim_daily",
    "unban",
    "week_start",
    "weekly_board",
    "write_messages",
]
