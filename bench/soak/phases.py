"""The soak's availability phases, played by the in-process bot after the feed, the workers
scoring all along (docs/architecture.md, "The front door"):

- **stuck**: one room's round row held locked by a Postgres session of the harness's own
  (as a worker that died mid-transaction leaves it), an admin's `/endround` there first, then
  the guesses of `stuck_chats` other rooms. Their guesses must all be taken while the lock
  is held, within `STUCK_BOUND_S` (`stuck_others_late` counts those that were not), and the
  `/endround` must end its round once the lock is gone (`stuck_command_lost`).
- **outage**: Redis shut down for `outage_down_s` while `outage` guesses are typed, then
  started again with its data: each must end up stored exactly once, and no chat told more
  than once that the game is catching up (`outage_notices_over_one`).

The verify then finds each phase's guesses stored exactly once, by each player's count in
each round (`stuck_lost`, `stuck_twice`, `outage_lost`, `outage_twice`), as the backlog's.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
import time
from collections import Counter
from typing import Any

import asyncpg
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bench.backlog_world import Backlog, BacklogPlan, eventually_true
from bench.soak.world import ADMIN_ID, FIRST_CHAT_ID, FIRST_PLAYER_ID, RecordingLanes, SoakState
from codemojex import usecases
from codemojex.db import store
from codemojex.game import texts
from codemojex.limits import ROOM
from codemojex.locale import EN
from codemojex.standin import StandIn

# Far from the soak's own rooms and players, and from the backlog phase's.
STUCK_OFFSET, OUTAGE_OFFSET = 200_000, 300_000
# The other rooms' guesses are all taken this soon, the lock still held: the bot's deadline
# (1 s) and the time to take a few hundred guesses on a loaded machine.
STUCK_BOUND_S = 5.0


class AvailabilityPhases(SoakState):
    stuck: Backlog | None = None
    outage: Backlog | None = None
    stuck_report: dict[str, Any]
    outage_report: dict[str, Any]

    def _world(self, standin: StandIn, offset: int, chats: int, per_player: int) -> Backlog:
        plan = BacklogPlan(
            groups=chats,
            players=4,
            per_player=per_player,
            first_chat=FIRST_CHAT_ID - offset,
            first_user=FIRST_PLAYER_ID + 10 * offset,
            seed=self.plan.seed,
        )
        backlog = Backlog(plan, standin)
        backlog.add_people()
        return backlog

    async def stuck_phase(
        self,
        standin: StandIn,
        lanes: RecordingLanes,
        sessionmaker: async_sessionmaker[AsyncSession],
    ) -> None:
        plan = self.plan
        backlog = self._world(standin, STUCK_OFFSET, plan.stuck_chats, 5)
        await backlog.open_rounds(sessionmaker)
        stuck_chat = backlog.plan.chat(backlog.plan.groups)  # a room of its own
        standin.add_group(stuck_chat, "stuck", admins=[ADMIN_ID], members=[ADMIN_ID])
        room = await usecases.ensure_room(
            sessionmaker,
            stuck_chat,
            "stuck",
            default_ceiling=2,
            round_timeout_s=ROOM.round_timeout_s_max,
        )
        round_id = (await usecases.start_round(sessionmaker, room.id, random.Random(1))).id
        rooms = set(backlog.rooms.values())
        holder = await asyncpg.connect(self.pg.url.replace("postgresql+asyncpg", "postgresql"))
        try:
            lock = holder.transaction()
            await lock.start()
            await holder.execute("SELECT id FROM rounds WHERE id = $1 FOR UPDATE", round_id)
            self.faults.note(f"stuck: round {round_id} locked for {plan.stuck_hold_s:g} s")
            began = time.monotonic()
            standin.send_text(stuck_chat, ADMIN_ID, "/endround")
            typed = backlog.type_guesses()

            def taken() -> int:
                return sum(1 for r in list(lanes.accepted.values()) if r in rooms)

            async def all_taken() -> bool:
                return taken() >= typed

            with contextlib.suppress(TimeoutError):
                await eventually_true(all_taken, plan.stuck_hold_s, "the other rooms", 0.05)
            others_s = time.monotonic() - began
            late = typed - taken() if others_s > STUCK_BOUND_S else 0
            await asyncio.sleep(max(0.0, plan.stuck_hold_s - (time.monotonic() - began)))
            await lock.rollback()
        finally:
            await holder.close()

        async def ended() -> bool:
            async with sessionmaker() as session:
                return await store.open_round(session, room.id) is None

        try:
            await eventually_true(ended, 60, "the stuck room's /endround", 0.1)
            command_lost = 0
        except TimeoutError:
            command_lost = 1
        self.faults.note(
            f"stuck: {typed} guesses of other rooms taken in {others_s:.1f} s, the lock held; "
            f"/endround {'lost' if command_lost else 'took effect'} after it"
        )
        self.stuck = backlog
        self.stuck_report = {
            "stuck_others_taken_s": round(others_s, 2),
            "stuck_others_late": late,
            "stuck_command_lost": command_lost,
        }

    async def outage_phase(
        self, standin: StandIn, sessionmaker: async_sessionmaker[AsyncSession]
    ) -> None:
        plan = self.plan
        per_player = max(1, math.ceil(plan.outage / (plan.outage_chats * 4)))
        backlog = self._world(standin, OUTAGE_OFFSET, plan.outage_chats, per_player)
        await backlog.open_rounds(sessionmaker)
        guesses = list(backlog.guesses())
        rate = len(guesses) / plan.outage_down_s
        await self.redis_server.shutdown()
        self.faults.note(f"outage: redis SHUTDOWN, {len(guesses)} guesses at {rate:.0f}/s")
        began = time.monotonic()
        for n, (chat, user, text) in enumerate(guesses):
            await asyncio.sleep(max(0.0, n / rate - (time.monotonic() - began)))
            standin.send_text(chat, user, text)
        await self.redis_server.start()
        self.faults.note("outage: redis back")

        async def confirmed() -> bool:
            return standin.pending_updates == 0

        await eventually_true(confirmed, plan.drain_timeout_s, "the outage's guesses", 0.05)
        notices = Counter(
            m.chat_id
            for g in range(backlog.plan.groups)
            for m in standin.sent_messages(backlog.plan.chat(g))
            if m.text == texts.catching_up(EN)
        )
        self.outage = backlog
        self.outage_report = {
            "outage_chats_told": len(notices),
            "outage_notices_over_one": sum(1 for n in notices.values() if n > 1),
        }
