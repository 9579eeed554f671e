"""The flows that write: each loads through `codemojex.db.store`, decides through `codemojex.game`
and writes through the store, in the transactions it opens (`async with uow(sessions) as tx:`,
`codemojex/db/unit.py`). The bot, the worker and the ops page call them; they call none of
those. Whoever only reads does so through the store's reads (`unit.reading`); the outbox
sender keeps its books itself (`posting/sender/delivery.py`).

`guesses`: recording a batch of guesses (the score worker's); `rounds`: starting a round,
ending one (timed out, or an admin's /endround); `settings`: a room's settings and its pause;
`daily`: the daily code (opening today's, where a player stands); `rooms`: rooms and players
on first sight; `moderation`: what admins do to players; `audit`: the audit log, whose row
makes an admin command apply once per message; `derived`: the lanes' pause, ceiling and
weights as the database says, after a commit; `retention`: the workers' trims. Callers use
the names re-exported here: `usecases.start_round(...)`.
"""

from codemojex.usecases.audit import Audit, audit, audit_command
from codemojex.usecases.daily import DailyView, Opened, daily_on, open_daily, puzzle_today, todays
from codemojex.usecases.derived import ceiling as derive_ceiling
from codemojex.usecases.guesses import LateBudget, record_guesses
from codemojex.usecases.moderation import Member, Moderated, Weighted, ban, unban, weight
from codemojex.usecases.retention import trim_audit, trim_daily
from codemojex.usecases.rooms import ensure_player, ensure_room
from codemojex.usecases.rounds import Ended, close_round, end_round, expire_rounds, start_round
from codemojex.usecases.settings import pause_room, update_room_settings

__all__ = [
    "Audit",
    "DailyView",
    "Ended",
    "LateBudget",
    "Member",
    "Moderated",
    "Opened",
    "Weighted",
    "audit",
    "audit_command",
    "ban",
    "close_round",
    "daily_on",
    "derive_ceiling",
    "end_round",
    "ensure_player",
    "ensure_room",
    "expire_rounds",
    "open_daily",
    "pause_room",
    "puzzle_today",
    "record_guesses",
    "start_round",
    "todays",
    "trim_audit",
    "trim_daily",
    "unban",
    "update_room_settings",
    "weight",
]
