"""The soak's chaos: what breaks while the guesses flow."""

from __future__ import annotations

import asyncio
import contextlib
import time

from bench.soak.world import RecordingLanes, SoakState


class Chaos(SoakState):
    """The faults: workers SIGKILLed and restarted all along, Redis shut down and killed,
    Postgres stopped, each at its share of the feed."""

    async def worker_killer(self) -> None:
        plan, rng = self.plan, self.rng
        restarts: set[asyncio.Task[None]] = set()

        async def restart(slot: int, after: float) -> None:
            await asyncio.sleep(after)
            self.fleet.spawn(slot)

        while not self.feeding_done.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.feeding_done.wait(), rng.uniform(*plan.kill_every_s))
            if self.feeding_done.is_set():
                break
            # Only a worker that is up and consuming: on a loaded machine a Python process can
            # take many seconds to start, and killing it before that proves nothing.
            ready = self.fleet.ready()
            if not ready:
                continue
            slot = rng.choice(ready)
            self.fleet.kill(slot)
            after = rng.uniform(*plan.restart_after_s)
            self.faults.note(f"worker {slot} SIGKILL, restart in {after:.1f}s")
            task = asyncio.create_task(restart(slot, after))
            restarts.add(task)
            task.add_done_callback(restarts.discard)
        await asyncio.gather(*restarts)

    async def at_progress(self, lanes: RecordingLanes, fraction: float) -> bool:
        """Wait until `fraction` of the guesses were accepted, or of the feeding time is
        spent (a run cut short by its time cap still gets every fault)."""
        until = time.monotonic() + fraction * self.plan.feed_timeout_s
        while len(lanes.accepted) < fraction * self.plan.guesses and time.monotonic() < until:
            if self.feeding_done.is_set():
                return False
            await asyncio.sleep(0.1)
        return True

    async def infrastructure_faults(self, lanes: RecordingLanes) -> None:
        plan = self.plan
        if await self.at_progress(lanes, 0.2):
            self.faults.note("redis SHUTDOWN (clean)")
            await self.redis_server.shutdown()
            await asyncio.sleep(plan.redis_down_s)
            await self.redis_server.start()
            self.faults.note("redis back")
        if await self.at_progress(lanes, 0.45):
            self.faults.note(f"postgres stop -m fast for {plan.pg_outage_s:.0f}s")
            await asyncio.to_thread(self.pg.stop, "fast")
            await asyncio.sleep(plan.pg_outage_s)
            await asyncio.to_thread(self.pg.start)
            self.faults.note("postgres back")
        if await self.at_progress(lanes, 0.7):
            self.faults.note("redis SIGKILL")
            self.redis_server.kill()
            await asyncio.sleep(plan.redis_down_s)
            await self.redis_server.start()
            self.faults.note("redis back")
        self.faults_done.set()
