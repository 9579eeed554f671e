"""The guesses of one event-loop turn enqueued together: one script call (`Lanes.admit`).

Handlers that take guesses at about the same moment (PTB runs up to `bot_concurrency` at
once) each hand their admission here and await its answer; the first of a turn schedules a
flush for the end of the turn, which sends everything handed in by then as one call. A call
in flight does not hold the next turn's back: each flush goes out on its own, and a sender's
guesses still enter their lane in order (their handler waits for one before taking the
next). A Redis that fails the call fails every admission in it: each handler answers "try
again" (nothing was written: the script is atomic).
"""

from __future__ import annotations

import asyncio

from codemojex.lanes import Admission, Admitted, Lanes


class Intake:
    """Batches `admit` calls per event-loop turn; `flushes` counts the calls made."""

    def __init__(self, lanes: Lanes) -> None:
        self._lanes = lanes
        self._pending: list[tuple[Admission, asyncio.Future[Admitted]]] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self.flushes = 0
        self.admitted = 0

    async def admit(self, admission: Admission) -> Admitted:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Admitted] = loop.create_future()
        if not self._pending:
            loop.call_soon(self._flush)
        self._pending.append((admission, future))
        return await future

    def _flush(self) -> None:
        batch, self._pending = self._pending, []
        if batch:
            task = asyncio.create_task(self._send(batch), name="bot:intake")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _send(self, batch: list[tuple[Admission, asyncio.Future[Admitted]]]) -> None:
        self.flushes += 1
        self.admitted += len(batch)
        try:
            answers = await self._lanes.admit([admission for admission, _ in batch])
        except BaseException as exc:
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        for (_, future), answer in zip(batch, answers, strict=True):
            if not future.done():
                future.set_result(answer)
