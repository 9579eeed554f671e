"""The flows that join the store and the game: each loads through `codemojex.db.store`,
decides through `codemojex.game` and writes through the store, in one transaction it opens.
The bot and the worker call them; they call neither.

`guesses`: recording a batch of guesses (the score worker's); `rounds`: starting a round,
ending one (timed out, or an admin's /endround); `settings`: a room's settings; `daily`: the
daily code (opening today's, where a player stands). Callers use the names re-exported here:
`usecases.start_round(...)`.
"""

from codemojex.usecases.guesses import LateBudget, record_guesses
from codemojex.usecases.rounds import close_round, expire_rounds, start_round
from codemojex.usecases.settings import update_room_settings

__all__ = [
    "LateBudget",
    "close_round",
    "expire_rounds",
    "record_guesses",
    "start_round",
    "update_room_settings",
]
