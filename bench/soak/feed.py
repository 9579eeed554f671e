"""Feeding the soak: the rooms and players, then guesses, through the bot or straight into the
lanes, until the plan's number is accepted."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from redis.exceptions import RedisError
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bench.soak.world import (
    ADMIN_ID,
    BARRIER_ID,
    FIRST_CHAT_ID,
    FIRST_PLAYER_ID,
    GRAPHEME,
    RecordingLanes,
    RoomSim,
    SoakState,
)
from codemojex import usecases
from codemojex.bot.guesses import GUESS_ATTEMPTS
from codemojex.db import (
    Room,
    Round,
    store,
)
from codemojex.lanes import LaneFull, Lanes
from codemojex.standin import StandIn
from codemojex.values import ids
from codemojex.values.jobs import GuessJob

log = logging.getLogger("bench.soak")


class Feeding(SoakState):
    """Typing guesses into the stand-in for the real bot (`feed`), or enqueueing them as the
    bot would (`feed_direct`, the `--via lanes` runs), keeping the rounds open."""

    def build_world(self, standin: StandIn) -> None:
        plan = self.plan
        standin.add_user(ADMIN_ID, "Admin")
        standin.add_user(BARRIER_ID, "Barrier")
        user = FIRST_PLAYER_ID
        for i in range(plan.rooms):
            flood = i == 0
            n = plan.flood_players if flood else plan.players
            players = list(range(user, user + n))
            user += n
            for uid in players:
                standin.add_user(uid, f"P{uid}")
            chat_id = FIRST_CHAT_ID - i
            standin.add_group(chat_id, f"soak room {i}", admins=[ADMIN_ID], members=players)
            ceiling = plan.flood_ceiling if flood else plan.ceilings[i % len(plan.ceilings)]
            self.sims.append(RoomSim(chat_id, players, ceiling, flood))

    async def backlog_below(self, limit: int) -> None:
        while self.typed - self.seen > limit:  # noqa: ASYNC110 - polls a counter of the bot's
            await asyncio.sleep(0.005)

    def type_text(self, standin: StandIn, chat_id: int, user_id: int, text: str) -> None:
        standin.send_text(chat_id, user_id, text)
        self.typed += 1

    async def settle(self, standin: StandIn, timeout_s: float = 120.0) -> None:
        """Wait until the bot handled everything typed so far (it answers a later /help).

        An answer that cannot get a posting slot within a few seconds is dropped (the bot's
        answers queue for the bot's 30 posts a second): after the 200 rooms' /limit of the
        set-up, all answered at once, the barrier's can be one of them. So the /help is sent
        again until one is answered."""
        deadline = time.monotonic() + timeout_s
        while True:
            before = len(standin.sent_messages(BARRIER_ID))
            standin.send_private(BARRIER_ID, "/help")
            self.typed += 1
            wait_s = min(15.0, max(0.1, deadline - time.monotonic()))
            try:
                await standin.wait_for_sent_count(before + 1, chat_id=BARRIER_ID, timeout=wait_s)
                return
            except TimeoutError:
                if time.monotonic() >= deadline:
                    raise

    def feeding(self, accepted: int) -> bool:
        """Until the plan's guesses are accepted and, with faults, every fault was injected
        while they were typed (a bot taking guesses faster than the faults come would
        otherwise leave some out)."""
        if accepted < self.plan.guesses:
            return True
        return self.plan.faults and not (self.faults_done.is_set() and self.fleet.kills > 0)

    async def refresh_rounds(self, sessionmaker: async_sessionmaker[AsyncSession]) -> None:
        async with sessionmaker() as session:
            rows = (
                await session.execute(
                    select(Round, Room.chat_id)
                    .join(Room, Room.id == Round.room_id)
                    .where(Round.ended_at.is_(None))
                )
            ).all()
        open_by_chat = {int(chat_id): rnd for rnd, chat_id in rows}
        for sim in self.sims:
            rnd = open_by_chat.get(sim.chat_id)
            if rnd is None:
                sim.round_id = None
                continue
            if sim.round_id != rnd.id:
                sim.round_id = rnd.id
                sim.palette = tuple(GRAPHEME.findall(rnd.palette))
                sim.length = rnd.length
                sim.secret = tuple(GRAPHEME.findall(rnd.secret))

    async def feed(
        self,
        standin: StandIn,
        lanes: RecordingLanes,
        sessionmaker: async_sessionmaker[AsyncSession],
    ) -> None:
        plan, rng = self.plan, self.rng
        quiet = [s for s in self.sims if not s.flood]
        flood = [s for s in self.sims if s.flood]
        last_refresh = 0.0
        last_report = time.monotonic()
        deadline = time.monotonic() + plan.feed_timeout_s
        while self.feeding(len(lanes.accepted)) and time.monotonic() < deadline:
            now = time.monotonic()
            if now - last_refresh > 0.3:
                last_refresh = now
                try:
                    await self.refresh_rounds(sessionmaker)
                except Exception as exc:  # Postgres is down on purpose: keep the last view
                    log.debug("refresh failed: %s", type(exc).__name__)
                for sim in self.sims:
                    if sim.round_id is None and now - sim.newgame_at > 3.0:
                        sim.newgame_at = now
                        self.type_text(standin, sim.chat_id, rng.choice(sim.players), "/newgame")
            if now - last_report > 5:
                last_report = now
                self.say(
                    f"  {len(lanes.accepted)}/{plan.guesses} accepted, {self.typed} typed, "
                    f"{self.seen} seen, workers alive {len(self.fleet.alive())}, "
                    f"open rounds {sum(1 for s in self.sims if s.round_id)}"
                )
            for _ in range(20):
                pool = flood if flood and rng.random() < plan.flood_share else quiet
                sim = rng.choice(pool)
                if sim.round_id is None or not sim.palette:
                    continue
                if rng.random() < plan.win_rate:
                    # Two players send the secret at once: at most one of them may win.
                    code = "".join(sim.secret)
                    for uid in rng.sample(sim.players, min(2, len(sim.players))):
                        self.type_text(standin, sim.chat_id, uid, f"/g {code}")
                    continue
                code = "".join(rng.choice(sim.palette) for _ in range(sim.length))
                text = f"/g {code}" if rng.random() < 0.8 else code
                self.type_text(standin, sim.chat_id, rng.choice(sim.players), text)
            await self.backlog_below(plan.max_backlog)
        self.feeding_done.set()

    async def setup_direct(
        self, lanes: Lanes, sessionmaker: async_sessionmaker[AsyncSession]
    ) -> None:
        """Rooms with their ceilings, players and first rounds, written with the store."""
        for sim in self.sims:
            room = await usecases.ensure_room(
                sessionmaker,
                sim.chat_id,
                f"soak {sim.chat_id}",
                default_ceiling=sim.ceiling,
                round_timeout_s=3600,
            )
            sim.room_id = room.id
            for uid in sim.players:
                player = await usecases.ensure_player(sessionmaker, room.id, uid, f"P{uid}")
                sim.player_ids[uid] = (player.id, player.display_name)
            await usecases.start_round(sessionmaker, room.id, self.rng)
            await lanes.limit(room.id, sim.ceiling)

    async def enqueue_direct(
        self, standin: StandIn, lanes: Lanes, sim: RoomSim, uid: int, code: tuple[str, ...]
    ) -> None:
        assert sim.round_id is not None
        text = "/g " + "".join(code)
        message_id = standin.send_text(sim.chat_id, uid, text)  # the message a result replies to
        self.typed += 1
        lane, _name = sim.player_ids[uid]
        job = GuessJob(round_id=sim.round_id, message_id=message_id, emojis=code)
        try:
            await lanes.enqueue(
                sim.room_id,
                lane,
                job.encode(),
                max_attempts=GUESS_ATTEMPTS,  # as the bot enqueues
                max_depth=self.plan.max_depth,
                # derived from the message, as the bot derives a guess's job id
                job_id=ids.derived(ids.JOB, f"m:{sim.chat_id}:{message_id}"),
            )
        except LaneFull:
            self.refused["lane_full"] += 1
        except (RedisError, OSError):
            self.refused["redis_down"] += 1

    async def feed_direct(
        self,
        standin: StandIn,
        lanes: RecordingLanes,
        sessionmaker: async_sessionmaker[AsyncSession],
    ) -> None:
        plan, rng = self.plan, self.rng
        quiet = [s for s in self.sims if not s.flood]
        flood = [s for s in self.sims if s.flood]
        last_refresh = last_report = 0.0
        pending = 0
        deadline = time.monotonic() + plan.feed_timeout_s
        while self.feeding(len(lanes.accepted)) and time.monotonic() < deadline:
            now = time.monotonic()
            if now - last_refresh > 0.3:
                last_refresh = now
                try:
                    await self.refresh_rounds(sessionmaker)
                    for sim in self.sims:
                        if sim.round_id is None:
                            with contextlib.suppress(store.RoundAlreadyOpen):
                                await usecases.start_round(sessionmaker, sim.room_id, rng)
                    await self.refresh_rounds(sessionmaker)
                except Exception as exc:  # Postgres is down on purpose: keep the last view
                    log.debug("refresh failed: %s", type(exc).__name__)
                try:
                    snap = await lanes.snapshot()
                    pending = sum(int(r["pending"]) for r in snap["rooms"].values())
                except (RedisError, OSError):
                    pending = plan.max_pending
            if now - last_report > 10:
                last_report = now
                extra = ""
                with contextlib.suppress(RedisError, OSError):
                    snap = await lanes.snapshot()
                    extra = (
                        f", active {snap['active']}, delayed {snap['delayed']}, "
                        f"ring {len(snap['ring'])}, check {(await lanes.check())[:3]}"
                    )
                self.say(
                    f"  {len(lanes.accepted)}/{plan.guesses} accepted, {pending} pending, "
                    f"workers ready {len(self.fleet.ready())}/{plan.workers}, "
                    f"refused {dict(self.refused)}{extra}"
                )
            if pending >= plan.max_pending:
                await asyncio.sleep(0.05)
                last_refresh = 0.0 if now - last_refresh > 0.1 else last_refresh
                continue
            for _ in range(20):
                pool = flood if flood and rng.random() < plan.flood_share else quiet
                sim = rng.choice(pool)
                if sim.round_id is None or not sim.palette:
                    continue
                if rng.random() < plan.win_rate:
                    for uid in rng.sample(sim.players, min(2, len(sim.players))):
                        await self.enqueue_direct(standin, lanes, sim, uid, sim.secret)
                    continue
                code = tuple(rng.choice(sim.palette) for _ in range(sim.length))
                await self.enqueue_direct(standin, lanes, sim, rng.choice(sim.players), code)
                pending += 1
            await asyncio.sleep(0)
        self.feeding_done.set()
