"""Benchmark: posting back, scored -> posted, with today's sender and main's side by side.

Each pattern runs the real outbox sender (`OutboxSender`, its pacer and leases on the real
Redis, its claims on a fresh Postgres database migrated with Alembic) against the Bot API
stand-in enforcing Telegram's limits (1 a second per chat, 20 a minute per group, 30 a second
for the bot; every refusal is a RetryAfter it counts). The bench plays the worker's part: it
writes the results to the outbox as the ScoreWorker's group commit does (one transaction for
all that are waiting), and then tells the sender (`poke`, the worker's hook); the time from
that commit to the stand-in accepting the message that carries the result is the latency.
Players react to what was posted, so a slow sender also slows the guesses down, as it would
in a chat.

Patterns:
- eager:   one player in a group guessing 0.1 s after each result, 15 guesses;
- human:   one player in a group, a guess 4 s after each result, 8 guesses;
- room10:  a room of 10 players each guessing every 2 s (60 s; --long: 3 minutes);
- chats40: 40 groups at once, one player each, 1-3 s of thought after each result (40 s);
- many:    200 groups (--long: 2,000) each guessing 0.2 s after each result, plus one flooding group
           writing 10 results a second (40 s): the bot's 30 a second bind; each chat's posts
           (the flooding one's against the median quiet one's), Jain's index over the quiet
           chats' p99, and the worst wait against ceil(chats / 30) + 2 s;
- raid:    the review's reproduction, through the real bot (python-telegram-bot polling the
           stand-in, 16 update slots): 16 accounts in one group send `/g` with no round open
           (each deserves an answer) twice a second for 10 s, while 10 quiet groups each
           send one such message, a second apart. The latency is the quiet groups' send ->
           answer posted (inf: none within a minute): an update that waits for an update
           slot shows here.
- spam1:   a player at a person's pace (3-6 s of thought after each result, 75 s:
           past the answer budget's refill) in a group where another member sends /help,
           /rules or an unknown command (/nope@bot) every 0.5 s through the real bot
           (`codemojex bot`, a process of its own as deployed, polling the stand-in). Target:
           every result within 3.5 s, 0 RetryAfter.
- spam100: 100 groups, each with a player guessing 0.2 s after each result (the
           bot's 30 a second bind, as in `many`) and a member sending a command every 3 s
           (the reckoning: at 20 a minute, one /help every ~3 s filled a group's
           minute, 90 such groups the bot's second) through the real bot (its own process),
           40 s; then the same run without the spammers (the bot running idle), and one with
           as many messages of chatter the bot ignores (the same load on the bot and the
           stand-in, no answer: what the machine's CPU costs the results). Target: the
           results' p99 within 10 % of the run without spammers (`p99_ratio`), 0 RetryAfter.
           (``--spam-think``: the players' thought, e.g. 3 for a person's pace;
           ``--spam-every``: the spammers' pace, e.g. 0.5: 200 updates a second.)

World runs (``--world``, bench/posting_world.py): guess -> shown through the real `codemojex
bot` and `codemojex worker` (and `codemojex sender` where the checkout has one), G groups each
with a guess every 4 s from 3 players, against a stand-in with a hidden bot-wide limit L:
``--world 200x30,1000x300,1000x10,2000x300,2000x10,1000x1000`` (the default set: ``--world
all``), each printing guess -> shown p50/p95/p99, never shown, posts/s, posts a minute per
group, Jain's index over the posts per group, the 429s (and their share of the sends), guess
-> scored and the learned rate. With a baseline the checkouts take turns run by run.

Run: ``.venv/bin/python -m bench.posting`` (about 12 minutes for both sides; ``--patterns``
to pick, ``--baseline`` for the checkout to compare with, default /work/baseline-main: main
before this change; ``--no-baseline`` for this checkout alone). Each side runs in a process
of its own with that checkout first on PYTHONPATH.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

PG_ADMIN_URL = os.environ.get(
    "CODEMOJEX_BENCH_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
REDIS_URL = os.environ.get("CODEMOJEX_BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
HERE = Path(__file__).resolve().parent.parent
# --save: the run the repo keeps (bench/results/README.md), its plot beside the others.
SAVED = HERE / "bench" / "results" / "posting.json"
SAVED_PLOT = HERE / "bench" / "plots" / "posting_latency.png"
# Results one group commit writes at most.
GROUP_COMMIT_MAX = 256
PATTERNS = ("eager", "human", "room10", "chats40", "many", "raid", "spam1", "spam100")
# What a spammer sends, in turn (the bot answers each in a group; /nope@<bot> is an unknown
# command addressed to it).
SPAM = ("/help", "/rules", "/nope@{bot}")


def _pct(values: list[float], q: float) -> float:
    if not values:
        return math.nan
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


def _jain(values: list[float]) -> float:
    if not values:
        return math.nan
    return sum(values) ** 2 / (len(values) * sum(v * v for v in values))


async def _admin(sql: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(PG_ADMIN_URL)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


class Run:
    """One pattern on one checkout: the database, Redis, the stand-in and the sender."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.written: dict[str, tuple[int, float]] = {}  # marker -> (chat, commit time)
        self.posted: dict[str, float] = {}
        self.events: dict[str, asyncio.Event] = {}
        self._seen = 0
        self._pending: list[tuple[int, str, asyncio.Future[None]]] = []
        self._commit_wanted = asyncio.Event()

    async def __aenter__(self) -> Run:
        import redis.asyncio as aioredis
        from pydantic import SecretStr

        from codemojex.db import make_engine, make_sessionmaker
        from codemojex.db.engine import upgrade
        from codemojex.posting.sender import OutboxSender
        from codemojex.settings import Settings
        from codemojex.standin import StandIn
        from codemojex.worker.botapi import make_bot

        self.db = f"bench_posting_{uuid.uuid4().hex[:10]}"
        await _admin(f'CREATE DATABASE "{self.db}"')
        base = PG_ADMIN_URL.rsplit("/", 1)[0].replace("postgresql://", "postgresql+asyncpg://")
        self.url = url = f"{base}/{self.db}"
        await asyncio.to_thread(upgrade, url)
        self.engine = make_engine(url, pool_size=20, max_overflow=10)
        self.sm = make_sessionmaker(self.engine)
        self.redis = aioredis.Redis.from_url(REDIS_URL, max_connections=128)
        self.queue = f"bp{uuid.uuid4().hex[:8]}"
        self.standin = StandIn()
        await self.standin.start()
        self.standin.enforce_rate_limits()
        settings = Settings(
            token=SecretStr(self.standin.token),
            bot_api_base_url=self.standin.base_url,
            bot_api_base_file_url=self.standin.base_file_url,
        )
        self._bot_cm = make_bot(settings.bot_api())
        bot = await self._bot_cm.__aenter__()
        # This sender hears of rows from `poke` (and the ring), main's scanned the outbox.
        ring = hasattr(OutboxSender, "turn")
        # main's worker scanned the outbox every second; this one's default is a minute.
        poll_s = 60.0 if ring else 1.0
        self.sender = OutboxSender(self.sm, bot, self.redis, namespace=self.queue, poll_s=poll_s)
        self.side = "ring" if ring else "main"
        self.stop = asyncio.Event()
        self.task = asyncio.create_task(self.sender.run(self.stop))
        self.watch = asyncio.create_task(self._watch())
        self.committer = asyncio.create_task(self._commit())
        # The worker process that runs the sender settles once started (gc.freeze and the
        # like), if the checkout under test has that step.
        try:
            from codemojex.runtime import settle_process
        except ImportError:
            pass
        else:
            settle_process()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.stop.set()
        self.watch.cancel()
        self.committer.cancel()
        await asyncio.gather(self.task, self.watch, self.committer, return_exceptions=True)
        await self._bot_cm.__aexit__(None, None, None)
        await self.standin.stop()
        await self.engine.dispose()
        keys = [k async for k in self.redis.scan_iter(match=f"*{{{self.queue}}}*", count=1000)]
        for i in range(0, len(keys), 500):
            await self.redis.delete(*keys[i : i + 500])
        await self.redis.aclose()
        await _admin(f'DROP DATABASE IF EXISTS "{self.db}" WITH (FORCE)')

    def add_group(self, chat: int) -> None:
        self.standin.add_group(chat, f"room {chat}")

    async def _watch(self) -> None:
        while True:
            sent = self.standin.sent_messages()
            for msg in sent[self._seen :]:
                for line in msg.text.split("\n"):
                    if line in self.written and line not in self.posted:
                        self.posted[line] = msg.ts
                        if (ev := self.events.get(line)) is not None:
                            ev.set()
            self._seen = len(sent)
            await asyncio.sleep(0.01)

    async def result(self, chat: int, marker: str) -> asyncio.Event:
        """Write one result to the outbox and tell the sender, as the worker does: in its
        group commit (one transaction for every result waiting when the last one ended), then
        `poke` for each chat. Returns once committed; the event is set when it is posted."""
        self.events[marker] = ev = asyncio.Event()
        committed = asyncio.get_running_loop().create_future()
        self._pending.append((chat, marker, committed))
        self._commit_wanted.set()
        await committed
        return ev

    async def _commit(self) -> None:
        from codemojex.db.store import outbox
        from codemojex.db.unit import uow
        from codemojex.values.clock import utcnow
        from codemojex.values.types import Message

        while True:
            await self._commit_wanted.wait()
            self._commit_wanted.clear()
            batch, self._pending = (
                self._pending[:GROUP_COMMIT_MAX],
                self._pending[GROUP_COMMIT_MAX:],
            )
            if self._pending:
                self._commit_wanted.set()
            messages = [Message(chat, marker, "result", None) for chat, marker, _ in batch]
            async with uow(self.sm) as tx:
                await outbox.write_messages(tx, messages, utcnow())
            now = time.monotonic()
            for chat, marker, committed in batch:
                self.written[marker] = (chat, now)
                committed.set_result(None)
            for chat in dict.fromkeys(chat for chat, _, _ in batch):
                self.sender.poke(chat)

    async def drain(self, limit_s: float = 60.0) -> None:
        deadline = time.monotonic() + limit_s
        while len(self.posted) < len(self.written) and time.monotonic() < deadline:  # noqa: ASYNC110 - a poll of what the watcher saw
            await asyncio.sleep(0.1)

    def latencies(self, chats: set[int] | None = None) -> list[float]:
        return [
            self.posted[m] - t
            for m, (c, t) in self.written.items()
            if m in self.posted and (chats is None or c in chats)
        ]

    def summary(
        self, started: float, ended: float, chats: set[int] | None = None
    ) -> dict[str, Any]:
        lat = self.latencies(chats)
        msgs = [m for m in self.standin.sent_messages() if started <= m.ts <= ended + 60]
        return {
            "side": self.side,
            "results": len(self.written),
            "lost": len(self.written) - len(self.posted),
            "p50": _pct(lat, 0.50),
            "p95": _pct(lat, 0.95),
            "p99": _pct(lat, 0.99),
            "max": max(lat, default=math.nan),
            "messages": len(msgs),
            "posts_per_s": len(msgs) / max(0.001, ended - started),
            "retry_after": self.standin.rate_violations,
            "latencies": sorted(round(v, 3) for v in lat),
        }

    def max_per_minute(self, chat: int) -> int:
        times = sorted(m.ts for m in self.standin.sent_messages(chat))
        best, j = 0, 0
        for i, t in enumerate(times):
            while times[j] <= t - 60:
                j += 1
            best = max(best, i - j + 1)
        return best


async def _player(
    run: Run, chat: int, count: int | None, think: Callable[[], float], until: float
) -> None:
    for i in itertools.count():
        if (count is not None and i >= count) or time.monotonic() >= until:
            return
        ev = await run.result(chat, f"c{chat}g{i}")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(ev.wait(), 60)
        await asyncio.sleep(think())


@contextlib.asynccontextmanager
async def _bot(run: Run) -> AsyncIterator[None]:
    """The real bot (python-telegram-bot polling the stand-in) on the run's Redis, database
    and queue, with the checkout's defaults (its pace for answers, its answer budget)."""
    from codemojex.bot import build_application, running
    from codemojex.lanes import Lanes
    from codemojex.settings import Settings

    settings = Settings(
        token=run.standin.token,
        bot_api_base_url=run.standin.base_url,
        bot_api_base_file_url=run.standin.base_file_url,
        queue=run.queue,
    )
    app = build_application(
        settings.bot(), lanes=Lanes(run.redis, run.queue), sessionmaker=run.sm, redis=run.redis
    )
    async with running(app, poll_timeout=1):
        yield


@contextlib.asynccontextmanager
async def _bot_process(run: Run) -> AsyncIterator[None]:
    """`codemojex bot` as the process it is deployed as (its own interpreter and event loop),
    on the stand-in, the run's Redis, database and queue, with the checkout's defaults; up once
    it answered a /help in a private chat, stopped with SIGTERM."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CODEMOJEX_")}
    env.update(
        CODEMOJEX_TOKEN=run.standin.token,
        CODEMOJEX_BOT_API_BASE_URL=run.standin.base_url,
        CODEMOJEX_BOT_API_BASE_FILE_URL=run.standin.base_file_url,
        CODEMOJEX_REDIS_URL=REDIS_URL,
        CODEMOJEX_DATABASE_URL=run.url,
        CODEMOJEX_QUEUE=run.queue,
    )
    workdir = Path(tempfile.mkdtemp(prefix="bench-bot-"))  # no stray .env is read
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "codemojex.cli",
        "bot",
        env=env,
        cwd=workdir,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        probe = 8999
        run.standin.add_user(probe, "Probe")
        run.standin.send_private(probe, "/help")
        await run.standin.wait_for_sent_count(1, chat_id=probe, timeout=60)
        yield
    finally:
        if proc.returncode is None:
            proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), 30)
            except TimeoutError:
                proc.kill()
                await proc.wait()
        shutil.rmtree(workdir, ignore_errors=True)


async def _spammer(
    run: Run, chat: int, uid: int, every_s: float, until: float, texts: tuple[str, ...] = SPAM
) -> int:
    """A member sending `texts` (the commands of SPAM) in turn every `every_s` until `until`."""
    bot = run.standin.bot.username or "bot"
    sent = 0
    while time.monotonic() < until:
        run.standin.send_text(chat, uid, texts[sent % len(texts)].format(bot=bot))
        sent += 1
        await asyncio.sleep(every_s)
    return sent


def _answers(run: Run, chats: set[int]) -> list[Any]:
    """The posts in `chats` that carry no result: the bot's answers."""
    return [
        m
        for m in run.standin.sent_messages()
        if m.chat_id in chats and not any(line in run.written for line in m.text.split("\n"))
    ]


async def spam1(run: Run) -> dict[str, Any]:
    chat, spammer = -600_001, 8001
    run.standin.add_user(spammer, "Spammer")
    run.standin.add_group(chat, "spammed", members=[spammer])
    rng = random.Random(22)
    async with _bot_process(run):
        started = time.monotonic()
        until = started + 75.0
        commands, _ = await asyncio.gather(
            _spammer(run, chat, spammer, 0.5, until),
            _player(run, chat, None, lambda: rng.uniform(3.0, 6.0), until),
        )
        await run.drain()
        await asyncio.sleep(4)  # the last answers (posted or dropped)
    ended = time.monotonic()
    answers = _answers(run, {chat})
    return {
        **run.summary(started, ended, {chat}),
        "commands": commands,
        "answer_posts": len(answers),
        "within_3_5s": sum(1 for v in run.latencies({chat}) if v <= 3.5),
    }


async def _hundred(run: Run, spam: tuple[str, ...], every_s: float, think: float) -> dict[str, Any]:
    chats = [-700_000 - i for i in range(100)]
    spammers = list(range(9000, 9100))
    for chat, uid in zip(chats, spammers, strict=True):
        run.standin.add_user(uid, f"S{uid}")
        run.standin.add_group(chat, f"room {chat}", members=[uid])
    async with _bot_process(run):
        started = time.monotonic()
        until = started + 40.0
        pairs = zip(chats, spammers, strict=True)
        spamming = [_spammer(run, c, uid, every_s, until, spam) for c, uid in pairs] if spam else []
        _, commands = await asyncio.gather(
            asyncio.gather(*(_player(run, c, None, lambda: think, until) for c in chats)),
            asyncio.gather(*spamming),
        )
        await run.drain()
        await asyncio.sleep(4)
    ended = time.monotonic()
    out = run.summary(started, ended, set(chats))
    out["commands"] = sum(commands)
    out["answer_posts"] = len(_answers(run, set(chats)))
    return out


async def spam100(think: float, every_s: float) -> dict[str, Any]:
    """`spam100`, its twin without spammers, and one whose members send as many messages of
    chatter the bot ignores (the same load on the bot, no answer), one after the other."""
    async with Run("spam100") as run:
        spammed = await _hundred(run, SPAM, every_s, think)
    async with Run("quiet100") as run:
        quiet = await _hundred(run, (), every_s, think)
    async with Run("chatter100") as run:
        chatter = await _hundred(run, ("lol",), every_s, think)
    return {
        **spammed,
        "p99_without_spam": quiet["p99"],
        "p99_ratio": spammed["p99"] / quiet["p99"],
        "results_without_spam": quiet["results"],
        "retry_after_without_spam": quiet["retry_after"],
        "p99_chatter": chatter["p99"],
        "p99_ratio_to_chatter": spammed["p99"] / chatter["p99"],
    }


async def raid(run: Run) -> dict[str, Any]:
    raided, quiet = -500_000, [-500_001 - i for i in range(10)]
    raiders, locals_ = list(range(7001, 7017)), list(range(7101, 7111))
    for uid in raiders + locals_:
        run.standin.add_user(uid, f"U{uid}")
    run.standin.add_group(raided, "raided", members=raiders)
    for chat, uid in zip(quiet, locals_, strict=True):
        run.standin.add_group(chat, f"quiet {chat}", members=[uid])
    latencies: list[float] = []
    async with _bot(run):
        until = time.monotonic() + 10.0

        async def raider(uid: int) -> None:
            while time.monotonic() < until:
                run.standin.send_text(raided, uid, "/g 🍎🍌🍇🍒")
                await asyncio.sleep(0.5)

        async def local(chat: int, uid: int, delay: float) -> None:
            await asyncio.sleep(delay)
            sent = time.monotonic()
            mid = run.standin.send_text(chat, uid, "/g 🍎🍌🍇🍒")
            try:
                found = await run.standin.wait_for_sent(
                    lambda m: m.reply_to_message_id == mid, 60, chat_id=chat
                )
            except TimeoutError:
                latencies.append(math.inf)  # not answered within a minute
                return
            latencies.append(found.ts - sent)

        await asyncio.gather(
            *(raider(u) for u in raiders),
            *(local(c, u, 1.0 + i) for i, (c, u) in enumerate(zip(quiet, locals_, strict=True))),
        )
        await asyncio.sleep(4)  # the last answers (posted or dropped)
    lat = sorted(latencies)
    return {
        "side": run.side,
        "results": len(lat),
        "lost": sum(1 for v in lat if math.isinf(v)),
        "p50": _pct(lat, 0.5),
        "p95": _pct(lat, 0.95),
        "p99": _pct(lat, 0.99),
        "max": max(lat, default=math.nan),
        "posts_per_s": len(run.standin.sent_messages()) / 16.0,
        "retry_after": run.standin.rate_violations,
        "raided_posts": len(run.standin.sent_messages(raided)),
        "latencies": [round(v, 3) for v in lat],
    }


async def pattern(
    name: str, long: bool, spam_think: float = 0.2, spam_every: float = 3.0
) -> dict[str, Any]:
    rng = random.Random(7)
    if name == "spam100":
        return await spam100(spam_think, spam_every)
    async with Run(name) as run:
        if name == "raid":
            return await raid(run)
        if name == "spam1":
            return await spam1(run)
        started = time.monotonic()
        extra: dict[str, Any] = {}
        if name in ("eager", "human"):
            chat = -100_001
            run.add_group(chat)
            count, think = (15, 0.1) if name == "eager" else (8, 4.0)
            await _player(run, chat, count, lambda: think, started + 600)
        elif name == "room10":
            chat = -100_002
            run.add_group(chat)
            seconds = 180.0 if long else 60.0
            until = started + seconds

            async def guesser(p: int) -> None:
                await asyncio.sleep(p * 0.2)
                for i in itertools.count():
                    if time.monotonic() >= until:
                        return
                    await run.result(chat, f"p{p}g{i}")
                    await asyncio.sleep(2.0)

            await asyncio.gather(*(guesser(p) for p in range(10)))
            await run.drain()
            extra["max_posts_in_60s"] = run.max_per_minute(chat)
        elif name == "chats40":
            chats = [-200_000 - i for i in range(40)]
            for c in chats:
                run.add_group(c)
            until = started + 40.0
            await asyncio.gather(
                *(_player(run, c, None, lambda: rng.uniform(1.0, 3.0), until) for c in chats)
            )
        elif name == "many":
            chats = [-300_000 - i for i in range(2_000 if long else 200)]
            flood = -399_999
            for c in [*chats, flood]:
                run.add_group(c)
            until = started + 40.0

            async def flooder() -> None:
                for i in itertools.count():
                    if time.monotonic() >= until:
                        return
                    await run.result(flood, f"flood{i}")
                    await asyncio.sleep(0.1)

            await asyncio.gather(
                flooder(), *(_player(run, c, None, lambda: 0.2, until) for c in chats)
            )
            await run.drain()
            quiet = set(chats)
            per_chat: dict[int, list[float]] = defaultdict(list)
            for m, (c, t) in run.written.items():
                if m in run.posted and c in quiet:
                    per_chat[c].append(run.posted[m] - t)
            posts = {c: len(run.standin.sent_messages(c)) for c in [*chats, flood]}
            extra["flood_posts"] = posts[flood]
            # Posts while the quiet chats still had something waiting (after them, the ring
            # holds the flooding chat alone and it posts at its group's pace).
            last_quiet = max(m.ts for c in chats for m in run.standin.sent_messages(c))
            extra["flood_posts_meanwhile"] = sum(
                1 for m in run.standin.sent_messages(flood) if m.ts <= last_quiet
            )
            extra["quiet_posts_median"] = statistics.median(posts[c] for c in chats)
            extra["jain_p99"] = _jain([_pct(v, 0.99) for v in per_chat.values()])
            extra["bound_s"] = math.ceil(len(chats) / 30) + 2
            ended = time.monotonic()
            out = run.summary(started, ended, quiet)
            return {**out, **extra}
        await run.drain()
        ended = time.monotonic()
        return {**run.summary(started, ended), **extra}


def _child(args: argparse.Namespace) -> None:
    import logging

    logging.basicConfig(level=logging.ERROR)
    out = asyncio.run(pattern(args.child, args.long, args.spam_think, args.spam_every))
    print("RESULT " + json.dumps(out), flush=True)


def _side(checkout: Path, name: str, args: argparse.Namespace) -> dict[str, Any] | None:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", name]
    cmd += ["--spam-think", str(args.spam_think), "--spam-every", str(args.spam_every)]
    if args.long:
        cmd.append("--long")
    proc = subprocess.run(cmd, env=env, cwd=checkout, capture_output=True, text=True)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return dict(json.loads(line[len("RESULT ") :]))
    print(f"{checkout} {name} failed:\n{proc.stderr[-3000:]}", file=sys.stderr)
    return None


def _fmt(v: object) -> str:
    if isinstance(v, float):
        return "-" if math.isnan(v) else f"{v:.2f}"
    return str(v)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--patterns", default=",".join(PATTERNS))
    parser.add_argument("--baseline", default="/work/baseline-main")
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--long", action="store_true")
    parser.add_argument(
        "--spam-think", type=float, default=0.2, help="spam100: the players' thought, s"
    )
    parser.add_argument(
        "--spam-every", type=float, default=3.0, help="spam100: s between a spammer's commands"
    )
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--plot", type=Path, help="write the latency plot (PNG) here")
    parser.add_argument(
        "--save",
        action="store_true",
        help=f"write {SAVED.relative_to(HERE)} and {SAVED_PLOT.relative_to(HERE)}, the run kept",
    )
    parser.add_argument("--replot", type=Path, help="only plot the results of this JSON")
    parser.add_argument("--child", choices=PATTERNS)
    parser.add_argument("--world", help="GxL,... world runs (or 'all'): see the docstring")
    parser.add_argument("--world-seconds", type=float, default=60.0, help="guessing, s")
    parser.add_argument("--world-settle", type=float, default=150.0, help="then at most, s")
    parser.add_argument("--world-profile", type=Path, help="py-spy the processes, stacks here")
    args = parser.parse_args()
    if args.world:
        _worlds(args)
        return
    if args.save:
        if args.json or args.plot:
            parser.error("--save writes the kept run's files; --json and --plot name others")
        args.json, args.plot = SAVED, SAVED_PLOT
    if args.child:
        _child(args)
        return
    if args.replot:
        plot(json.loads(args.replot.read_text()), args.plot or args.replot.with_suffix(".png"))
        return
    sides = [HERE] + ([] if args.no_baseline else [Path(args.baseline)])
    results: dict[str, dict[str, Any]] = {}
    columns = [
        "pattern",
        "side",
        "results",
        "lost",
        "p50",
        "p95",
        "p99",
        "max",
        "posts_per_s",
        "retry_after",
        "extra",
    ]
    print(" | ".join(columns))
    for name in args.patterns.split(","):
        for checkout in sides:
            out = _side(checkout, name, args)
            if out is None:
                continue
            if len(sides) > 1:  # both sides may have the same sender: name them by checkout
                out["side"] = "this" if checkout == HERE else "base"
            results[f"{name}:{out['side']}"] = out
            extra = {k: v for k, v in out.items() if k not in columns and k != "latencies"}
            row = [name] + [_fmt(out.get(c)) for c in columns[1:-1]]
            row.append(" ".join(f"{k}={_fmt(v)}" for k, v in extra.items() if k != "messages"))
            print(" | ".join(row), flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    if args.plot:
        plot(results, args.plot)


def _worlds(args: argparse.Namespace) -> None:
    """The world runs (bench/posting_world.py), this checkout and the baseline's by turns."""
    import subprocess as sp

    from bench.pipeline import TODAY, Code
    from bench.posting_world import COLUMNS, RUNS, run_worlds

    runs = (
        list(RUNS)
        if args.world == "all"
        else [(int(g), int(lim)) for g, lim in (w.split("x") for w in args.world.split(","))]
    )
    codes = [TODAY] if args.no_baseline else [Code("base", Path(args.baseline)), TODAY]
    print(sp.run(["uptime"], capture_output=True, text=True).stdout.strip(), flush=True)
    print(" | ".join(COLUMNS), flush=True)
    out = asyncio.run(
        run_worlds(codes, runs, args.world_seconds, args.world_settle, args.world_profile)
    )
    for result in out:
        print(
            f"{result['code']} {result['groups']}x{result['limit']} groups with 0, 1, ... "
            f"posts: {result.get('posts_per_group_whole_run')}"
        )
        for story in result.get("slowest", []):
            print(f"{result['code']} {result['groups']}x{result['limit']} slowest: {story}")
        for key in [k for k in result if k.startswith("profile_")]:
            print(f"{result['code']} {key}:")
            for frame, own, total in result[key]:
                print(f"  {own:5.1f} {total:5.1f}  {frame}")
    print(sp.run(["uptime"], capture_output=True, text=True).stdout.strip(), flush=True)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1, default=str))


def plot(results: dict[str, dict[str, Any]], path: Path) -> None:
    """Scored -> posted per pattern, main's sender against this one (p50, p95, p99, max)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [n for n in PATTERNS if any(k.startswith(n + ":") for k in results)]
    stats = ("p50", "p95", "p99", "max")
    # Older results name the sides by their sender (main, ring), newer by checkout.
    sides = (
        (("main", "#d62728", "main (6749618)"), ("ring", "#2ca02c", "posting ring"))
        if any(k.endswith((":main", ":ring")) for k in results)
        else (("base", "#d62728", "base (--baseline)"), ("this", "#2ca02c", "this checkout"))
    )
    fig, axes = plt.subplots(1, len(names), figsize=(3.2 * len(names), 3.6))
    for ax, name in zip(axes if len(names) > 1 else [axes], names, strict=True):
        for i, (side, color, label) in enumerate(sides):
            out = results.get(f"{name}:{side}")
            if out is None:
                continue
            xs = [j + (i - 0.5) * 0.38 for j in range(len(stats))]
            ax.bar(xs, [out[s] for s in stats], width=0.38, color=color, label=label)
        ax.set_xticks(range(len(stats)), stats)
        ax.set_title(name)
        ax.grid(axis="y", alpha=0.3)
    first = axes[0] if len(names) > 1 else axes
    first.set_ylabel("scored -> posted, s (raid: send -> answer)")
    first.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
