"""The game's use-cases over an AsyncSession: load, lock and write; the rules are in
`codemojex.game`.

One module per use: `rooms` (rooms, players, a room's settings and card), `rounds` (open,
close, expire), `guesses` (record a batch), `seats` (the batch's players), `outbox` (what the
sender posts), `stats` (records), `admin` (bans, audit). Callers use the names re-exported
here: `store.record_guesses(...)`.

Every function commits (or rolls back) its own transaction, readers included: on SQLite every
transaction holds the write lock (BEGIN IMMEDIATE, see `engine.py`), so none may be left open.
Objects returned stay readable after the commit (the session maker sets
expire_on_commit=False).
"""

from codemojex.db.store.admin import audit, audit_refused, ban, is_banned, trim_audit, unban
from codemojex.db.store.errors import (
    InvalidCeiling,
    RoundAlreadyOpen,
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
    "GlobalStats",
    "InvalidCeiling",
    "LeaderRow",
    "PlayerStats",
    "RoomCard",
    "RoundAlreadyOpen",
    "Seat",
    "StoreError",
    "UnknownPlayer",
    "UnknownRoom",
    "WeekRow",
    "audit",
    "audit_refused",
    "ban",
    "chats_with_unsent",
    "claim_outbox",
    "close_round",
    "ensure_player",
    "ensure_room",
    "expire_rounds",
    "get_player",
    "get_room",
    "global_stats",
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
    "unban",
    "update_room_settings",
    "week_start",
    "weekly_board",
    "write_messages",
]
