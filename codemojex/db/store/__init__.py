"""The game's use-cases over an AsyncSession: load, lock and write; the rules are in
`codemojex.game`.

One module per use: `rooms` (rooms, players, a room's settings and card), `rounds` (open,
close, expire), `guesses` (record a batch), `seats` (the batch's players), `outbox` (what the
sender posts), `stats` (records), `admin` (bans, audit), `daily` (the daily code's puzzles,
results and records; its parts of a transaction are for `codemojex.usecases.daily`). Callers
use the names re-exported here: `store.record_guesses(...)`.

Every function commits (or rolls back) its own transaction, readers included: on SQLite every
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
from codemojex.db.store.guesses import record_guesses
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
    update_room_settings,
)
from codemojex.db.store.rounds import (
    close_round,
    due_rounds,
    expire_rounds,
    next_expiry,
    open_round,
    start_round,
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
    "close_round",
    "daily_entries",
    "daily_names",
    "daily_record",
    "due_rounds",
    "ensure_player",
    "ensure_room",
    "expire_rounds",
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
    "record_guesses",
    "release_outbox",
    "room_by_chat",
    "room_card",
    "room_chats",
    "start_round",
    "trim_audit",
    "trim_daily",
    "unban",
    "update_room_settings",
    "week_start",
    "weekly_board",
    "write_messages",
]
