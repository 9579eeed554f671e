"""The soak's handover phases: a chat's order kept when the process holding its parked update
is not the one that gets the chat's next update (docs/architecture.md, "The front door"),
with real `codemojex bot` processes once the in-process bot has stopped:

- **failover**: two polling processes, the second standing by. `handover_chats` rooms have
  their round row locked (as a worker that died mid-transaction leaves it), so an admin's
  `/endround` in each is parked past its deadline; the poller is SIGKILLed holding them and
  the locks let go; then each room's `/newgame`. The standby takes over.
- **webhook**: two webhook processes behind a balancer, each room's `/endround` to the first
  (parked there), its `/newgame` to the second, the guesses alternating.

Either way every `/endround` must apply before its room's `/newgame`: the room ends with a
new round open (`<phase>_out_of_order`: a room left without one, the `/newgame` refused while
the old round still ran; `<phase>_commands_lost`: the locked round still open). Meanwhile the
players of as many other rooms type guesses, half before the handover and half after: each
stored exactly once (`<phase>_lost`, `<phase>_twice`, verify.py `check_typed`).
"""

from __future__ import annotations

import contextlib
import itertools
import random
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import asyncpg
import redis.asyncio as aioredis
from aiohttp import web
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bench.backlog_world import Backlog, BotProcess, bot_env, eventually_true
from bench.common import free_port
from bench.soak.phases import AvailabilityPhases
from bench.soak.world import ADMIN_ID, FIRST_CHAT_ID, QUEUE
from codemojex import usecases
from codemojex.db import store
from codemojex.limits import ROOM
from codemojex.standin import SECRET_HEADER, StandIn
from codemojex.state.keys import Keys

# Far from the soak's own rooms and players, and from the other phases'.
FAILOVER_OFFSET, WEBHOOK_OFFSET = 400_000, 500_000
# The rooms whose commands are handed over sit this far from the phase's guessing rooms.
COMMAND_ROOMS = 50_000
# Each phase's guesses per player of its guessing rooms.
PER_PLAYER = 6
HOOK = "/telegram/hook"


class HandoverPhases(AvailabilityPhases):
    failover: Backlog | None = None
    webhook: Backlog | None = None

    async def failover_phase(
        self, standin: StandIn, sessionmaker: async_sessionmaker[AsyncSession]
    ) -> None:
        env = self._env(standin)
        first = BotProcess(env, self.workdir / "failover-1.log")
        second = BotProcess(env, self.workdir / "failover-2.log")
        try:
            await first.start()

            async def handover() -> None:
                await second.start()

                async def standing_by() -> bool:
                    return "another process polls this bot" in second.output()

                await eventually_true(standing_by, 60, "the second bot standing by", 0.1)
                first.signal(signal.SIGKILL)
                await first.wait()

            await self._phase(
                "failover", FAILOVER_OFFSET, standin, sessionmaker, handover, newgame_first=False
            )
            second.signal(signal.SIGTERM)
            await second.wait(60)
        finally:
            await first.ensure_gone()
            await second.ensure_gone()

    async def webhook_phase(
        self, standin: StandIn, sessionmaker: async_sessionmaker[AsyncSession]
    ) -> None:
        ports = [free_port(), free_port()]
        bots: list[BotProcess] = []
        async with balancer(ports) as url:
            try:
                for n, port in enumerate(ports):
                    env = self._env(
                        standin, mode="webhook", webhook_port=port, CODEMOJEX_WEBHOOK_URL=url
                    )
                    bots.append(BotProcess(env, self.workdir / f"webhook-{n}.log"))
                    await bots[-1].start()
                hooks = standin.calls["setWebhook"]

                async def both_up() -> bool:
                    return standin.calls["setWebhook"] >= hooks + 2

                await eventually_true(both_up, 90, "both webhook processes up", 0.1)

                async def delivered() -> bool:
                    return standin.pending_updates == 0

                async def answered() -> None:
                    # Each /newgame to the other process, answered while its room's /endround
                    # is still parked (the round locked).
                    await eventually_true(delivered, 60, "the /newgame answered", 0.1)

                await self._phase(
                    "webhook", WEBHOOK_OFFSET, standin, sessionmaker, answered, newgame_first=True
                )
                for bot in bots:
                    bot.signal(signal.SIGTERM)
                for bot in bots:
                    await bot.wait(60)
            finally:
                for bot in bots:
                    await bot.ensure_gone()

    def _env(self, standin: StandIn, **options: Any) -> dict[str, str]:
        return bot_env(
            standin,
            redis_url=self.redis_server.url,
            database_url=self.pg.url,
            queue=QUEUE,
            CODEMOJEX_MAX_DEPTH=str(max(self.plan.max_depth, PER_PLAYER)),
            **options,
        )

    async def _phase(
        self,
        name: str,
        offset: int,
        standin: StandIn,
        sessionmaker: async_sessionmaker[AsyncSession],
        handover: Callable[[], Awaitable[None]],
        *,
        newgame_first: bool,
    ) -> None:
        """Lock the command rooms' rounds, type each one's /endround and half the guesses,
        wait until every /endround is parked, type each room's /newgame before the handover
        (`newgame_first`) or after it, `handover()`, let the locks go, type the other half;
        then check every room's order."""
        chats = self.plan.handover_chats
        guessing = self._world(standin, offset, chats, PER_PLAYER)
        await guessing.open_rounds(sessionmaker)
        guesses = list(guessing.guesses())
        rooms = await self._command_rooms(standin, sessionmaker, offset + COMMAND_ROOMS, chats)
        parked_key = Keys(QUEUE).inbox_parked
        redis = aioredis.Redis.from_url(self.redis_server.url)

        def newgames() -> None:
            for chat, _, _ in rooms:
                standin.send_text(chat, ADMIN_ID, "/newgame")

        holder = await asyncpg.connect(self.pg.url.replace("postgresql+asyncpg", "postgresql"))
        try:
            lock = holder.transaction()
            await lock.start()
            await holder.execute(
                "SELECT id FROM rounds WHERE id = ANY($1::bigint[]) FOR UPDATE",
                [round_id for _, _, round_id in rooms],
            )
            for chat, _, _ in rooms:
                standin.send_text(chat, ADMIN_ID, "/endround")
            half = len(guesses) // 2
            for chat, user, text in guesses[:half]:
                standin.send_text(chat, user, text)

            async def parked() -> bool:
                return int(await redis.hlen(parked_key)) >= chats

            await eventually_true(parked, 120, f"{name}: every /endround parked", 0.1)
            self.faults.note(f"{name}: {chats} /endround parked, their rounds locked")
            if newgame_first:
                newgames()
            await handover()
            await lock.rollback()
            if not newgame_first:
                newgames()
            for chat, user, text in guesses[half:]:
                standin.send_text(chat, user, text)

            async def settled() -> bool:
                return standin.pending_updates == 0 and not int(await redis.hlen(parked_key))

            await eventually_true(settled, self.plan.drain_timeout_s, f"{name}: settled", 0.1)
        finally:
            await holder.close()
            await redis.aclose()
        out_of_order = lost = 0
        async with sessionmaker() as session:
            for _, room_id, round_id in rooms:
                now = await store.open_round(session, room_id)
                out_of_order += now is None
                lost += now is not None and now.id == round_id
        setattr(self, name, guessing)
        self.handover_report = {
            **getattr(self, "handover_report", {}),
            f"{name}_guesses_typed": len(guesses),
            f"{name}_out_of_order": out_of_order,
            f"{name}_commands_lost": lost,
        }
        self.faults.note(
            f"{name}: {chats} rooms' /endround then /newgame: {out_of_order} out of order, "
            f"{lost} lost"
        )

    async def _command_rooms(
        self,
        standin: StandIn,
        sessionmaker: async_sessionmaker[AsyncSession],
        offset: int,
        chats: int,
    ) -> list[tuple[int, str, int]]:
        """(chat, room id, open round id) of `chats` rooms whose admin is ADMIN_ID."""
        rng = random.Random(self.plan.seed)
        rooms = []
        for n in range(chats):
            chat = FIRST_CHAT_ID - offset - n
            standin.add_group(chat, f"handover {n}", admins=[ADMIN_ID], members=[ADMIN_ID])
            room = await usecases.ensure_room(
                sessionmaker,
                chat,
                f"handover {n}",
                default_ceiling=2,
                round_timeout_s=ROOM.round_timeout_s_max,
            )
            rnd = await usecases.start_round(sessionmaker, room.id, rng)
            rooms.append((chat, room.id, rnd.id))
        return rooms


@contextlib.asynccontextmanager
async def balancer(ports: list[int]) -> AsyncIterator[str]:
    """A webhook balancer in front of two bot processes (deploy/nginx's place): a room's
    /endround to the first, its /newgame to the second, every other update in turn. Yields
    the URL Telegram is told."""
    turn = itertools.count()
    session = aiohttp.ClientSession()

    async def forward(request: web.Request) -> web.Response:
        body = await request.read()
        text = ((await request.json()).get("message") or {}).get("text", "")
        port = ports[0] if text == "/endround" else ports[1] if text == "/newgame" else None
        if port is None:
            port = ports[next(turn) % len(ports)]
        headers = {SECRET_HEADER: request.headers.get(SECRET_HEADER, ""),
                   "Content-Type": "application/json"}  # fmt: skip
        try:
            async with session.post(f"http://127.0.0.1:{port}{HOOK}", data=body,
                                    headers=headers) as answer:  # fmt: skip
                return web.Response(status=answer.status)
        except aiohttp.ClientError:
            return web.Response(status=502)

    app = web.Application()
    app.router.add_post(HOOK, forward)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield f"http://127.0.0.1:{port}{HOOK}"
    finally:
        await runner.cleanup()
        await session.close()
