"""What operators read and mend through the lanes' facade (`Lanes` has these verbs;
docs/lanes.md, "What operators read"): the totals and the deepest rooms, a page of rooms, the
rooms a round timer waits for, the dead jobs and a requeue, the invariants' check and repair."""

from __future__ import annotations

from collections.abc import Mapping

from codemojex.lanes import keys as K
from codemojex.lanes.calls import Calls, checked, text
from codemojex.lanes.views import DeadJob, QueueStats, RoomQueue


class OperatorVerbs(Calls):
    async def stats(self, top: int = 0) -> QueueStats:
        """The queue's totals and the `top` deepest rooms, from the books: no walk over
        rooms or jobs, so the metrics may ask every scrape."""
        return QueueStats.parse(await self._call("stats", checked(top, "top", 0, 1000)))

    async def rooms(self, rooms: list[str]) -> list[RoomQueue]:
        """Pending, in flight, ceiling, pause, oldest wait and last enqueue of these rooms
        (a page of them: each costs its lanes with work)."""
        checked = [K.check_room(room) for room in rooms]
        if not checked:
            return []
        return [RoomQueue.parse(row) for row in await self._call("rooms", *checked)]

    async def rooms_by(
        self, book: str, offset: int, count: int, *, descending: bool = True
    ) -> tuple[int, list[tuple[str, int]]]:
        """A page of the rooms ranked in a book: "depth" (pending jobs; rooms with none are
        not in it) or "activity" (last enqueue in ms): (rooms in the book, [(room, value)]).
        O(log n + count): Redis finds a rank in a sorted set without walking it."""
        key = {"depth": self.keys.rdepth, "activity": self.keys.rseen}[book]
        start = checked(offset, "offset", 0, 2**31)
        stop = start + checked(count, "count", 1, 1000) - 1
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.zcard(key)
            if descending:
                pipe.zrevrange(key, start, stop, withscores=True)
            else:
                pipe.zrange(key, start, stop, withscores=True)
            total, rows = await pipe.execute()
        return int(total), [(text(room), int(score)) for room, score in rows]

    async def waiting_before(self, moments: Mapping[str, int]) -> tuple[int, set[str]]:
        """(Redis's time in ms, the rooms of `moments` that still hold a job enqueued before
        their moment in ms: pending, in flight or waiting for a retry). For the round timer
        (rounds past their deadline); costs those rooms' lanes with work, the leases and the
        delayed jobs."""
        args: list[str | int] = []
        for room, moment in moments.items():
            args += [K.check_room(room), checked(moment, "moment", 0, 2**53)]
        now, *flags = await self._call("waiting", *args)
        return int(now), {room for room, flag in zip(moments, flags, strict=True) if int(flag)}

    async def dead(self, offset: int = 0, count: int = 50) -> tuple[int, list[DeadJob]]:
        """A page of the dead jobs, latest deaths first: (dead jobs in all, the page)."""
        total, rows = await self._call(
            "dead", checked(offset, "offset", 0, 2**31), checked(count, "count", 1, 1000)
        )
        return int(total), [DeadJob.parse(row) for row in rows]

    async def requeue(self, job_id: str) -> bool:
        """A dead job back into its lane, its attempts allowance given again; False when it
        is not (any more) a dead job."""
        return bool(await self._call("requeue", K.check_job(job_id)))

    async def check(self, *, deep: bool = True) -> list[str]:
        """Every violated invariant, read from the raw keys; [] when the queue is sound.

        `deep` also SCANs the database (one pass, inside the script) for keys that nothing
        in the queue leads to, such as a job hash that lost its place; without it the check
        costs only the queue's own size."""
        return [line.decode() for line in await self._call("check", "1" if deep else "0")]

    async def repair(self) -> list[str]:
        """Fix gactive, placements and both rings from the raw state; what was fixed."""
        return [line.decode() for line in await self._call("repair")]
