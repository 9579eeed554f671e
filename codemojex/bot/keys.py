"""The `cmx:{q}:` keys of the bot alone (none of the worker's reads them), beside those of
posting/keys.py, which names every key bot and worker share, built the same way (the queue's
hash tag, integers formatted with %d: user text never reaches a key name):

    cmx:{q}:inline:rate:<user>     a user's inline queries in the current rate window
"""

from __future__ import annotations

from codemojex.posting.keys import Keys, _integer


class BotKeys(Keys):
    """Key names of one queue's `cmx:` state, the bot's own included."""

    __slots__ = ()

    def inline_rate(self, user_id: int) -> str:
        return f"{self.prefix}inline:rate:{_integer(user_id, 'user id'):d}"
