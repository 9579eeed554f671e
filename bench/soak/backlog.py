"""The soak's backlog phase: guesses waiting at the stand-in while no bot runs, then a real
`codemojex bot` process draining them, SIGKILLed half-way and restarted; the workers score
them all along. The soak's verify then finds each of them stored exactly once
(verify.py `check_backlog`): the bot confirms to Telegram only what it stored, and the one
that restarts gets again whatever the dead one had not confirmed.
"""

from __future__ import annotations

import math
import signal
from collections.abc import Awaitable, Callable

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bench.backlog_world import Backlog, BacklogPlan, BotProcess, bot_env, eventually_true
from bench.soak.world import FIRST_CHAT_ID, FIRST_PLAYER_ID, QUEUE, SoakState
from codemojex.standin import StandIn

# Far from the soak's own rooms and players.
BACKLOG_CHAT_OFFSET = 100_000
BACKLOG_USER_OFFSET = 1_000_000


class BacklogPhase(SoakState):
    backlog: Backlog | None = None

    async def backlog_phase(
        self,
        standin: StandIn,
        sessionmaker: async_sessionmaker[AsyncSession],
        stop_bot: Callable[[], Awaitable[None]],
    ) -> None:
        """Type the backlog, stop the in-process bot (one poller per token), and drain it
        with a bot process killed once half of it is confirmed."""
        plan = self.plan
        per_room = plan.backlog_players * plan.backlog_per_player
        bplan = BacklogPlan(
            groups=math.ceil(plan.backlog / per_room),
            players=plan.backlog_players,
            per_player=plan.backlog_per_player,
            first_chat=FIRST_CHAT_ID - BACKLOG_CHAT_OFFSET,
            first_user=FIRST_PLAYER_ID + BACKLOG_USER_OFFSET,
            seed=plan.seed,
        )
        backlog = Backlog(bplan, standin)
        backlog.add_people()
        await backlog.open_rounds(sessionmaker)
        await stop_bot()
        typed = backlog.type_guesses()
        self.backlog = backlog
        self.faults.note(f"backlog: {typed} guesses waiting, the in-process bot stopped")
        env = bot_env(
            standin,
            redis_url=self.redis_server.url,
            database_url=self.pg.url,
            queue=QUEUE,
            CODEMOJEX_MAX_DEPTH=str(max(plan.max_depth, bplan.per_player)),
        )
        log = self.workdir / "bot.log"
        first, second = BotProcess(env, log), BotProcess(env, log)
        try:
            await first.start()

            async def half() -> bool:
                return standin.pending_updates <= typed // 2

            await eventually_true(half, 120, "half the backlog confirmed", every_s=0.01)
            first.signal(signal.SIGKILL)
            await first.wait()
            self.faults.note(f"backlog: bot SIGKILLed, {standin.pending_updates} unconfirmed")
            await second.start()

            async def drained() -> bool:
                return standin.pending_updates == 0

            await eventually_true(drained, plan.drain_timeout_s, "the backlog confirmed", 0.05)
            second.signal(signal.SIGTERM)
            code = await second.wait(60)
            self.faults.note(f"backlog: drained by the restarted bot (exit {code})")
        finally:
            await first.ensure_gone()
            await second.ensure_gone()
