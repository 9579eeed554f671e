"""The daily code's world board, in Redis: what `/top daily`, `/daily` in a group and the ops
page read, and what the workers add to after each finish's commit (bot and worker share it,
so it lives in the layer both import).

Per day (keys built in state/keys.py, all under the queue's hash tag):
- a sorted set of the finishers (user id -> `game.daily.board_score`: attempts, then the
  time of the finish), so a rank, the top ten and a count are each O(log n);
- a HyperLogLog of who opened the day's daily (how many played: ±1%, 12 KB a day);
- a marker: the set holds every finish Postgres has.

Postgres is the record; this is an index of it, rebuilt when lost. Every write is idempotent
(ZADD of a finisher's one score, PFADD), so a rebuild and the finishes written meanwhile add up
to the whole day whatever their order. A finish whose ZADD failed is recorded again when its
guess comes back (the worker hands the batch back; its duplicate carries the finish), so the
marker never stands for a board with a hole. The keys expire BOARD_TTL_S after their
last write: yesterday's board stays readable for a while after midnight, then goes by itself.
"""

from __future__ import annotations

import secrets
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any, Final

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from codemojex.db import store
from codemojex.db.reading import reading
from codemojex.game import daily
from codemojex.state.keys import Keys
from codemojex.values.daily import ATTEMPTS, Finish
from codemojex.values.redistypes import AnyRedis

# The world board's life from its day's start: yesterday's stays readable past midnight.
BOARD_TTL_S: Final = 3 * 24 * 3600
# A lost board's rebuild: rows per round trip, its lock's life (a dead rebuilder's ends).
REBUILD_CHUNK: Final = 5000
REBUILD_LOCK_MS: Final = 120_000


@dataclass(frozen=True, slots=True)
class Standing:
    """Where one player stands on a day's board."""

    finished: bool
    rank: int | None  # 1 for the best, among those who cracked it; None: not cracked
    cracked: int  # how many cracked it


@dataclass(frozen=True, slots=True)
class Counts:
    played: int  # opened the day's daily (approximate beyond a few thousand: a HyperLogLog)
    finished: int
    cracked: int
    complete: bool  # the board holds every finish (False: rebuilding, or lost)


class DailyBoard:
    """The world board of the daily code of one queue's deployment."""

    def __init__(
        self,
        redis: AnyRedis,
        queue: str,
        *,
        ttl_s: int = BOARD_TTL_S,
        max_attempts: int = ATTEMPTS,
    ) -> None:
        self._redis = redis
        self._keys = Keys(queue)
        self._ttl_s = ttl_s
        self._cracked_below = daily.cracked_below(max_attempts)
        self._max_attempts = max_attempts

    async def started(self, day: date, tg_user_id: int) -> None:
        """The player opened `day`'s daily."""
        played = self._keys.daily_played(day)
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.pfadd(played, str(tg_user_id))
            pipe.expire(played, self._ttl_s)
            await pipe.execute()

    async def finished(self, finishes: Sequence[Finish]) -> None:
        """These dailies finished (and were committed): onto their days' boards."""
        by_day: dict[date, dict[str, int]] = defaultdict(dict)
        for finish in finishes:
            by_day[finish.day][str(finish.tg_user_id)] = daily.board_score(
                finish, self._max_attempts
            )
        if not by_day:
            return
        async with self._redis.pipeline(transaction=False) as pipe:
            for day, scores in by_day.items():
                board = self._keys.daily_board(day)
                pipe.zadd(board, scores)
                pipe.expire(board, self._ttl_s)
            await pipe.execute()

    async def top(self, day: date, n: int) -> list[tuple[int, int]]:
        """The day's best `n` who cracked it: (user id, attempts), best first."""
        rows: Any = await self._redis.zrangebyscore(
            self._keys.daily_board(day),
            "-inf",
            f"({self._cracked_below}",
            start=0,
            num=max(0, n),
            withscores=True,
        )
        return [(int(member), daily.attempts_of(score)) for member, score in rows]

    async def standing(self, day: date, tg_user_id: int) -> Standing:
        board = self._keys.daily_board(day)
        member = str(tg_user_id)
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.zscore(board, member)
            pipe.zrank(board, member)
            pipe.zcount(board, "-inf", f"({self._cracked_below}")
            score, rank, cracked = await pipe.execute()
        is_cracked = score is not None and score < self._cracked_below
        return Standing(
            finished=score is not None,
            rank=int(rank) + 1 if is_cracked and rank is not None else None,
            cracked=int(cracked),
        )

    async def counts(self, day: date) -> Counts:
        board = self._keys.daily_board(day)
        # Not in the pipeline: redis-py's cluster client refuses PFCOUNT there (a multi-key
        # command to it, though the keys would share the slot).
        played = await self._redis.pfcount(self._keys.daily_played(day))
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.zcard(board)
            pipe.zcount(board, "-inf", f"({self._cracked_below}")
            pipe.exists(self._keys.daily_built(day))
            finished, cracked, built = await pipe.execute()
        return Counts(int(played), int(finished), int(cracked), bool(built))

    async def complete(self, day: date) -> bool:
        return bool(await self._redis.exists(self._keys.daily_built(day)))

    async def ensure(self, day: date, sessionmaker: async_sessionmaker[AsyncSession]) -> None:
        """Make sure `day`'s board holds every finish: one EXISTS when it does (the day's first
        reader builds it, cheaply: early in the day there is little to read), a rebuild from
        Postgres when Redis lost it."""
        if not await self.complete(day):
            await self.rebuild(day, sessionmaker)

    async def rebuild(
        self,
        day: date,
        sessionmaker: async_sessionmaker[AsyncSession],
        *,
        chunk: int = REBUILD_CHUNK,
    ) -> bool:
        """Read `day`'s players and finishes from Postgres a page at a time into the board, then
        set the marker. One process at a time (a lock); False when another holds it (its
        rebuild completes the board; until then readers see what is there)."""
        lock = self._keys.daily_rebuild(day)
        token = secrets.token_hex(8)
        if not await self._redis.set(lock, token, nx=True, px=REBUILD_LOCK_MS):
            return False
        try:
            after: int | None = None
            while True:
                async with reading(sessionmaker) as session:
                    page = await store.daily_entries(session, day, after, chunk)
                if page:
                    await self._add(day, page)
                    after = page[-1].tg_user_id
                if len(page) < chunk:
                    break
            await self._redis.set(self._keys.daily_built(day), b"1", ex=self._ttl_s)
            return True
        finally:
            held = await self._redis.get(lock)
            if held in (token, token.encode()):
                await self._redis.delete(lock)

    async def _add(self, day: date, page: Sequence[store.DailyEntry]) -> None:
        played = self._keys.daily_played(day)
        board = self._keys.daily_board(day)
        scores = {
            str(e.tg_user_id): daily.board_score(e.finish, self._max_attempts)
            for e in page
            if e.finish is not None
        }
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.pfadd(played, *(str(e.tg_user_id) for e in page))
            pipe.expire(played, self._ttl_s)
            if scores:
                pipe.zadd(board, scores)
                pipe.expire(board, self._ttl_s)
            await pipe.execute()
