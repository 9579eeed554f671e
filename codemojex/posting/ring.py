"""The posting ring: the chats with unsent outbox rows, taking turns for the bot's messages.

As the lanes ring rooms for the workers, this ring rings chats for the senders. A chat is in
the ring while it has rows to post (or may have: the ring errs on the side of a look too
many), scored by when its turn comes: when it was added, or when its pace allows its next
post after its last turn. A sender takes the chats whose turn has come, oldest first, each
with a chat lease (`lua/ring_take.lua`), posts one message to each (everything waiting for
it, folded), and hands it back (`lua/ring_release.lua`) with its next turn after its pace.
So when the bot's second binds, the chats with something waiting take turns: none waits
much more than a turn of the ring, and a flooding chat gets no more posts than a quiet one.

Who adds: the process that wrote the rows, right after its commit (`add`; the worker through
its sender's `poke`, the bot after it opened or closed a round). A process that died between
its commit and `add` leaves rows no one announced: the sender's slow reconciliation scan of
the outbox (once a minute) adds their chats. A chat whose turn finds its rows still claimed
(a turn that failed, a release lost to an outage) stays until the claim runs out
(sender/turn.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from codemojex.posting import scripts
from codemojex.posting.keys import Keys
from codemojex.values.redistypes import AnyRedis


@dataclass(frozen=True, slots=True)
class Turns:
    """What `take` got: the chats now this sender's, and the ms until the next chat's turn
    in the ring (None: the ring is empty)."""

    chats: list[int]
    next_ms: int | None


class PostingRing:
    def __init__(self, redis: AnyRedis, namespace: str) -> None:
        self._keys = Keys(namespace)
        self._redis = redis
        # The ring was empty at the last look: an idle sender checks that it still is with
        # one EXISTS (an empty sorted set is no key) instead of the take script's four
        # commands, once a second.
        self._was_empty = False
        self._add = scripts.register(redis, "ring_add")
        self._take = scripts.register(redis, "ring_take")
        self._release = scripts.register(redis, "ring_release")

    async def add(self, chats: Iterable[int]) -> int:
        """These chats were given outbox rows: into the ring (a chat there keeps its turn)."""
        args = [f"{int(c):d}" for c in set(chats)]
        if not args:
            return 0
        return int(await self._add(keys=[self._keys.prefix], args=args))

    async def take(self, most: int, lease_ms: int, token: str) -> Turns:
        """Up to `most` chats whose turn has come, each leased to `token` for `lease_ms`."""
        if self._was_empty and not await self._redis.exists(self._keys.ring):
            return Turns([], None)
        raw = await self._take(keys=[self._keys.prefix], args=[max(0, most), lease_ms, token])
        first = int(raw[0])
        self._was_empty = first < 0 and len(raw) == 1
        return Turns([int(c) for c in raw[1:]], None if first < 0 else first)

    async def release(self, chat_id: int, token: str, delay_ms: int, more: bool) -> int:
        """Hand the chat back after its turn: its next turn in `delay_ms` when it has `more`
        to post (or was given rows meanwhile), out of the ring otherwise. 1: it stays,
        0: it left, -1: the lease was no longer `token`'s."""
        args: list[str | int] = [f"{chat_id:d}", token, max(0, delay_ms), 1 if more else 0]
        return int(await self._release(keys=[self._keys.prefix], args=args))
