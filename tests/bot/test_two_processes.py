"""Two `codemojex bot` processes serve one bot (webhook mode, a round-robin balancer in front
of them as nginx would be: deploy/nginx), one stream of updates split between them. Nothing
either process keeps for itself changes an outcome: every guess is taken once (an update
delivered twice, to each process once, makes one job), each room keeps its ceiling, a flood
gets one "slow down" and no more than its lane holds, and a tapped draft started on one
process is completed on the other."""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import aiohttp
import pytest
import redis.asyncio as aioredis
from aiohttp import web
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from codemojex.db import Round, make_engine, make_sessionmaker, store
from codemojex.game import taps, texts
from codemojex.lanes import Lanes
from codemojex.locale import EN
from codemojex.standin import SECRET_HEADER, StandIn
from codemojex.values import ids
from codemojex.values.jobs import GuessJob
from tests.bot.conftest import valid_guess
from tests.conftest import REDIS_URL
from tests.e2e.harness import eventually
from tests.helpers.support import checkout_env, codemojex_command, drop_keys, free_port, wipe_tables

SECRET = "two-processes-secret_0123456789abcdef"
MAX_DEPTH = 4
ADMIN, PLAYERS, BARRIER = 7001, [7101, 7102, 7103], 7999
ROOMS = [-1_007_000_000_001 - n for n in range(3)]


@dataclass
class Balancer:
    """Round robin over the bot processes' webhook ports (what deploy/nginx does), noting
    which process got each update."""

    ports: list[int]
    port: int = field(default_factory=free_port)
    served: list[tuple[int, dict[str, object]]] = field(default_factory=list)

    async def forward(self, request: web.Request) -> web.Response:
        body = await request.read()
        turn = len(self.served) % len(self.ports)
        self.served.append((turn, await request.json()))
        headers = {SECRET_HEADER: request.headers.get(SECRET_HEADER, ""),
                   "Content-Type": "application/json"}  # fmt: skip
        url = f"http://127.0.0.1:{self.ports[turn]}{request.path}"
        async with aiohttp.ClientSession() as http, http.post(url, data=body, headers=headers) as r:
            return web.Response(status=r.status)


@asynccontextmanager
async def balanced(balancer: Balancer) -> AsyncIterator[None]:
    app = web.Application()
    app.router.add_post("/telegram/hook", balancer.forward)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", balancer.port).start()
    try:
        yield
    finally:
        await runner.cleanup()


@pytest.mark.timeout(180)
async def test_two_bot_processes_take_one_stream_as_one(
    bot_database_url: str, bot_queue: str
) -> None:
    redis = aioredis.Redis.from_url(REDIS_URL)
    engine = make_engine(bot_database_url)
    await wipe_tables(engine, restart_ids=False)
    sessionmaker = make_sessionmaker(engine)
    lanes = Lanes(redis, bot_queue)
    balancer = Balancer([free_port(), free_port()])
    processes: list[asyncio.subprocess.Process] = []
    try:
        async with StandIn() as standin, balanced(balancer):
            for user in (ADMIN, *PLAYERS, BARRIER):
                standin.add_user(user, f"U{user}")
            for chat in ROOMS:
                standin.add_group(chat, f"room {chat}", admins=[ADMIN], members=PLAYERS)
            for port in balancer.ports:
                env = {
                    **{k: v for k, v in os.environ.items() if not k.startswith("CODEMOJEX_")},
                    "CODEMOJEX_TOKEN": standin.token,
                    "CODEMOJEX_BOT_API_BASE_URL": standin.base_url,
                    "CODEMOJEX_BOT_API_BASE_FILE_URL": standin.base_file_url,
                    "CODEMOJEX_REDIS_URL": REDIS_URL,
                    "CODEMOJEX_DATABASE_URL": bot_database_url,
                    "CODEMOJEX_QUEUE": bot_queue,
                    "CODEMOJEX_MAX_DEPTH": str(MAX_DEPTH),
                    "CODEMOJEX_DEFAULT_CEILING": "2",
                    "CODEMOJEX_WEBHOOK_URL": f"http://127.0.0.1:{balancer.port}/telegram/hook",
                    "CODEMOJEX_WEBHOOK_SECRET": SECRET,
                    "CODEMOJEX_WEBHOOK_LISTEN": "127.0.0.1",
                    "CODEMOJEX_WEBHOOK_PORT": str(port),
                }
                processes.append(
                    await asyncio.create_subprocess_exec(
                        *codemojex_command("bot"), env=checkout_env(env),
                        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
                    )
                )  # fmt: skip

            async def both_up() -> bool:  # each sets the webhook once its server listens
                return standin.calls["setWebhook"] >= 2

            await eventually(both_up, timeout=90, what="both bot processes up")
            await _play(standin, balancer, sessionmaker, lanes, redis)
    finally:
        outputs = []
        for process in processes:
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
            out, _ = await asyncio.wait_for(process.communicate(), 30)
            outputs.append(out.decode(errors="replace"))
        await drop_keys(redis, bot_queue)
        await redis.aclose()
        await engine.dispose()
    for process, log in zip(processes, outputs, strict=True):
        assert process.returncode == 0, log[-3000:]
        assert "Traceback" not in log, log[-3000:]


async def _play(
    standin: StandIn,
    balancer: Balancer,
    sessionmaker: async_sessionmaker[AsyncSession],
    lanes: Lanes,
    redis: aioredis.Redis,
) -> None:
    opened = [standin.send_text(chat, PLAYERS[n % 3], "/newgame") for n, chat in enumerate(ROOMS)]

    async def rounds_open() -> bool:
        async with sessionmaker() as session:
            n = (await session.execute(select(func.count()).select_from(Round))).scalar()
        return n == len(ROOMS)

    await eventually(rounds_open, timeout=30, what="a round in every room")
    rounds = {}
    async with sessionmaker() as session:
        for chat in ROOMS:
            room = await store.room_by_chat(session, chat)
            assert room is not None
            rnd = await store.open_round(session, room.id)
            assert rnd is not None
            rounds[chat] = (room.id, rnd)

    # The stream: every player guesses in every room, each update delivered twice (the
    # balancer gives the copy to the other process); one player floods the first room.
    expected: set[tuple[int, int]] = set()
    n = itertools.count(1)
    for chat in ROOMS:
        _, rnd = rounds[chat]
        for user in PLAYERS[1:]:
            for _ in range(2):
                mid = standin.send_text(chat, user, valid_guess(rnd, next(n)))
                message = standin.message(chat, mid)
                standin.push_raw_update({"message": message})
                expected.add((chat, mid))
    flood_chat = ROOMS[0]
    _, flood_round = rounds[flood_chat]
    flood = [
        standin.send_text(flood_chat, PLAYERS[0], valid_guess(flood_round, next(n)))
        for _ in range(MAX_DEPTH + 3)
    ]

    async def all_taken() -> bool:
        return await _queued(lanes) >= len(expected) + MAX_DEPTH

    await eventually(all_taken, timeout=60, what="every guess in the lanes")
    await _barrier(standin)
    assert await _queued(lanes) == len(expected) + MAX_DEPTH
    said = [m.text for mid in flood for m in standin.sent_messages(flood_chat)
            if m.reply_to_message_id == mid]  # fmt: skip
    assert said == [texts.slow_down(EN)]
    jobs = await _jobs(lanes, redis)
    taken = Counter((room, job.message_id) for room, job in jobs)
    room_chat = {room_id: chat for chat, (room_id, _) in rounds.items()}
    # Two processes take one sender's updates side by side: which of the flood's guesses
    # found room in the lane is theirs to race for; how many is not.
    flooded = {(flood_chat, mid) for mid in flood}
    got = {(room_chat[room], mid) for room, mid in taken}
    assert got - flooded == expected and len(got & flooded) == MAX_DEPTH
    assert set(taken.values()) == {1}  # every guess once, each update's copy deduplicated
    snapshot = await lanes.snapshot()
    assert {snapshot["rooms"][room_id]["ceiling"] for room_id, _ in rounds.values()} == {2}
    assert {turn for turn, _ in balancer.served} == {0, 1}  # both processes took updates

    # Taps, one request each, so the balancer alternates: the draft started on one process
    # is completed on the other.
    chat = ROOMS[1]
    _, rnd = rounds[chat]
    code = rnd.palette_emojis[: rnd.length]
    palette = list(rnd.palette_emojis)
    toasts, turns, query = [], [], ""
    for emoji in code:
        before = len(standin.callback_answers)
        data = taps.tap_data(rnd.id, palette.index(emoji))
        query = standin.press_button(chat, opened[1], PLAYERS[2], data, stale=True)

        async def answered(count: int = before) -> bool:
            return len(standin.callback_answers) > count

        await eventually(answered, timeout=15, what="the tap answered")
        toasts.append(standin.callback_answers[-1]["text"])
        turns.append(next(t for t, body in reversed(balancer.served) if "callback_query" in body))
    assert toasts[:-1] == [taps.show(tuple(palette.index(e) for e in code[: i + 1]), palette,
                                     rnd.length) for i in range(rnd.length - 1)]  # fmt: skip
    assert toasts[-1] == texts.tap_sent(EN, code)
    assert len(set(turns)) == 2
    # The tapped guess's job, its id derived from the callback query
    assert await redis.exists(lanes.keys.job(ids.derived(ids.JOB, f"cb:{query}")))
    assert await _queued(lanes) == len(expected) + MAX_DEPTH + 1


async def _queued(lanes: Lanes) -> int:
    snapshot = await lanes.snapshot()
    return sum(int(room["pending"]) for room in snapshot["rooms"].values())


async def _jobs(lanes: Lanes, redis: aioredis.Redis) -> list[tuple[str, GuessJob]]:
    out = []
    snapshot = await lanes.snapshot()
    for room_id, view in snapshot["rooms"].items():
        for lane in view["lanes"]:
            for job_id in await redis.zrange(lanes.keys.pending(lane), 0, -1):
                assert isinstance(job_id, bytes)
                payload = await redis.hget(lanes.keys.job(job_id.decode()), "p")
                assert isinstance(payload, bytes)
                out.append((room_id, GuessJob.decode(payload)))
    return out


async def _barrier(standin: StandIn) -> None:
    """A /help to each process (the balancer alternates): both handled what came before."""
    before = len(standin.sent_messages(BARRIER))
    for _ in range(2):
        standin.send_private(BARRIER, "/help")
    await standin.wait_for_sent_count(before + 2, chat_id=BARRIER, timeout=30)
