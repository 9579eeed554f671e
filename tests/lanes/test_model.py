"""Model-based test of the lanes on the real Redis (hypothesis stateful testing).

Random interleavings of every verb run against the real scripts and against a pure-Python
model of the queue, which models the rota exactly (both rings, in order). After every
step the whole keyspace is read back and compared with the model, and `check()` must be
clean. Lease expiry, due retries and time passing for retention (dead jobs growing old,
lanes idle long enough to be forgotten) are forced by rewriting scores, never by sleeping.
"""

from __future__ import annotations

import asyncio
import bisect
import os
import uuid
from dataclasses import dataclass, field
from typing import Any

import hypothesis.strategies as st
import pytest
import redis.asyncio as aioredis
from hypothesis import HealthCheck, settings
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from codemojex.lanes import Admission, Guard, Job, LaneError, LaneFull, Lanes
from codemojex.lanes.facade import RETENTION_MS_MAX
from codemojex.lanes.keys import Keys
from tests.conftest import REDIS_URL

ROOMS = [f"ROM{'0' * 25}{c}" for c in "123"]
LANES = [f"PLR{'0' * 25}{c}" for c in "12345"]
LEASE_MS = 600_000
DELAY_MS = 600_000
HOUR_MS = 3_600_000  # the retention rules' dead age and lane idle time
FOREVER_MS = RETENTION_MS_MAX  # retention that never applies in the other rule
STEPS = {"count": 0}


@dataclass
class MJob:
    id: str
    room: str
    lane: str
    seq: int
    max_attempts: int
    payload: bytes
    attempts: int = 0
    state: str = "pending"


@dataclass
class Model:
    seq: int = 0
    jobs: dict[str, MJob] = field(default_factory=dict)
    pending: dict[str, list[tuple[int, str]]] = field(default_factory=dict)
    lroom: dict[str, str] = field(default_factory=dict)
    ring: list[str] = field(default_factory=list)
    lanering: dict[str, list[str]] = field(default_factory=dict)
    glimit: dict[str, int] = field(default_factory=dict)
    gweight: dict[str, int] = field(default_factory=dict)
    paused: set[str] = field(default_factory=set)
    qpaused: bool = False
    active: set[str] = field(default_factory=set)
    delayed: set[str] = field(default_factory=set)
    dead: set[str] = field(default_factory=set)
    dedupe: dict[str, str] = field(default_factory=dict)
    wake: int = 0
    # a producer's own keys, which admit's guards read (and `nx` writes)
    card: dict[str, str] = field(default_factory=dict)
    seats: dict[str, str] = field(default_factory=dict)
    bans: set[str] = field(default_factory=set)

    # -- the state the scripts derive ring membership from ---------------------------------

    def by_seq(self, jids: Any) -> list[str]:
        """Job ids in mint order (ULIDs minted in one millisecond do not sort by time, and
        hypothesis needs the same choices on every run)."""
        return sorted(jids, key=lambda jid: self.jobs[jid].seq)

    def gactive(self, room: str) -> int:
        return sum(1 for jid in self.active if self.jobs[jid].room == room)

    def lanes_of(self, room: str) -> list[str]:
        return self.lanering.setdefault(room, [])

    def room_open(self, room: str) -> bool:
        if room in self.paused:
            return False
        return room not in self.glimit or self.gactive(room) < self.glimit[room]

    def room_serviceable(self, room: str) -> bool:
        return self.room_open(room) and bool(self.lanes_of(room))

    def push_wake(self) -> None:
        self.wake = min(64, self.wake + 1)

    def ring_room(self, room: str) -> None:
        self.ring.append(room)
        self.push_wake()

    def lane_join(self, room: str, lane: str) -> None:
        ring = self.lanes_of(room)
        ring.append(lane)
        if len(ring) == 1 and self.room_open(room):
            self.ring_room(room)

    def lane_filled(self, room: str, lane: str) -> None:
        if len(self.pending[lane]) == 1 and lane not in self.paused:
            self.lane_join(room, lane)

    def room_recheck(self, room: str, before: bool) -> None:
        after = self.room_serviceable(room)
        if before and not after:
            self.ring.remove(room)
        elif after and not before:
            self.ring_room(room)

    def lane_unring(self, room: str, lane: str) -> None:
        before = self.room_serviceable(room)
        self.lanes_of(room).remove(lane)
        self.room_recheck(room, before)

    def permit_freed(self, room: str, n: int = 1) -> None:
        act = self.gactive(room)
        lim = self.glimit.get(room)
        crossed = lim is not None and act < lim <= act + n
        if crossed and room not in self.paused and self.lanes_of(room):
            self.ring_room(room)

    def add_pending(self, job: MJob) -> None:
        job.state = "pending"
        bisect.insort(self.pending.setdefault(job.lane, []), (job.seq, job.id))
        self.lane_filled(job.room, job.lane)

    def bind(self, lane: str, room: str) -> None:
        self.lroom[lane] = room

    def delayed_of(self, lane: str) -> int:
        return sum(1 for jid in self.delayed if self.jobs[jid].lane == lane)

    def held(self, room: str) -> set[str]:
        """The room's paused lanes with pending jobs (its held set)."""
        return {
            lane
            for lane, r in self.lroom.items()
            if r == room and lane in self.paused and self.pending.get(lane)
        }

    # -- verbs ------------------------------------------------------------------------------

    def enqueue(
        self,
        room: str,
        lane: str,
        jid: str,
        payload: bytes,
        max_attempts: int,
        max_depth: int | None,
        dedupe: str | None,
    ) -> str | type[Exception]:
        if dedupe is not None and dedupe in self.dedupe:
            return self.dedupe[dedupe]
        if self.lroom.get(lane, room) != room:
            return LaneError
        if max_depth is not None and len(self.pending.get(lane, [])) >= max_depth:
            return LaneFull
        self.bind(lane, room)
        self.seq += 1
        job = MJob(jid, room, lane, self.seq, max_attempts, payload)
        self.jobs[jid] = job
        self.add_pending(job)
        if dedupe is not None:
            self.dedupe[dedupe] = jid
        return jid

    def serve(self, weighted: bool) -> list[MJob]:
        if self.qpaused or not self.ring:
            return []
        room = self.ring.pop(0)
        self.ring.append(room)
        ring = self.lanes_of(room)
        lane = ring.pop(0)
        ring.append(lane)
        k = max(1, self.gweight.get(lane, 1)) if weighted else 1
        if room in self.glimit:
            k = min(k, self.glimit[room] - self.gactive(room))
        heads = self.pending[lane][: max(k, 0)]
        del self.pending[lane][: len(heads)]
        served = []
        for _, jid in heads:
            job = self.jobs[jid]
            job.attempts += 1
            job.state = "active"
            self.active.add(jid)
            served.append(job)
        if not self.pending[lane]:
            ring.pop()
        if not self.room_serviceable(room):
            self.ring.pop()
        return served

    def holds(self, job: Job) -> bool:
        mine = self.jobs.get(job.id)
        return mine is not None and mine.state == "active" and mine.attempts == job.attempts

    def ack(self, job: Job) -> bool:
        if not self.holds(job):
            return False
        self.active.discard(job.id)
        del self.jobs[job.id]
        self.permit_freed(job.room)
        return True

    def ack_many(self, jobs: list[Job]) -> int:
        freed: dict[str, int] = {}
        for job in jobs:
            if self.holds(job):
                self.active.discard(job.id)
                del self.jobs[job.id]
                freed[job.room] = freed.get(job.room, 0) + 1
        for room, n in freed.items():  # rooms in order of first appearance
            self.permit_freed(room, n)
        return sum(freed.values())

    def retry(self, job: Job) -> str:
        if not self.holds(job):
            return "stale"
        mine = self.jobs[job.id]
        self.active.discard(job.id)
        if mine.attempts >= mine.max_attempts:
            mine.state = "dead"
            self.dead.add(job.id)
        else:
            mine.state = "delayed"
            self.delayed.add(job.id)
        self.permit_freed(mine.room)
        return mine.state

    def reap(self, jids: list[str]) -> None:
        for jid in jids:
            job = self.jobs[jid]
            self.active.discard(jid)
            self.permit_freed(job.room)
            if job.attempts >= job.max_attempts:
                job.state = "dead"
                self.dead.add(jid)
            else:
                self.add_pending(job)

    def promote(self, jids: list[str]) -> None:
        for jid in jids:
            self.delayed.discard(jid)
            self.add_pending(self.jobs[jid])

    def limit(self, room: str, n: int | None) -> None:
        before = self.room_serviceable(room)
        if n is None:
            self.glimit.pop(room, None)
        else:
            self.glimit[room] = n
        self.room_recheck(room, before)

    def pause(self, x: str) -> None:
        if x in self.paused:
            return
        if x.startswith("ROM"):
            before = self.room_serviceable(x)
            self.paused.add(x)
            self.room_recheck(x, before)
            return
        self.paused.add(x)
        if x in self.lroom and self.pending.get(x):
            self.lane_unring(self.lroom[x], x)

    def resume(self, x: str) -> None:
        if x not in self.paused:
            return
        self.paused.discard(x)
        if x.startswith("ROM"):
            self.room_recheck(x, False)
        elif x in self.lroom and self.pending.get(x):
            self.lane_join(self.lroom[x], x)

    def reassign(self, jid: str, target: str) -> bool | type[Exception]:
        job = self.jobs.get(jid)
        if job is None:
            return False
        if self.lroom.get(target, job.room) != job.room:
            return LaneError
        if job.state != "pending":
            return False
        if job.lane == target:
            return True
        self.bind(target, job.room)
        old = self.pending[job.lane]
        old.remove((job.seq, jid))
        if not old and job.lane not in self.paused:
            self.lane_unring(job.room, job.lane)
        job.lane = target
        self.add_pending(job)
        return True

    def trim_dead(self, old: list[str], recent: list[str], keep: int) -> list[str]:
        """Dead jobs past the age (`old`) go, and the oldest of the rest beyond `keep`."""
        gone = old + recent[: max(0, len(recent) - keep)]
        for jid in gone:
            self.dead.discard(jid)
            del self.jobs[jid]
        return gone

    def forget(self, due: list[str]) -> list[str]:
        """Of the lanes idle past the limit, those holding nothing, in a room with nothing
        in flight, are forgotten; the others stay (looked at again later)."""
        gone = [
            lane
            for lane in due
            if not self.pending.get(lane)
            and not self.delayed_of(lane)
            and not self.gactive(self.lroom[lane])
        ]
        for lane in gone:
            del self.lroom[lane]
        return gone

    def requeue(self, jid: str) -> bool | type[Exception]:
        """A dead job back into its lane at its seq, its allowance of attempts given again."""
        job = self.jobs.get(jid)
        if job is None or jid not in self.dead:
            return False
        if self.lroom.get(job.lane, job.room) != job.room:
            return LaneError
        self.dead.discard(jid)
        self.bind(job.lane, job.room)
        job.max_attempts += job.attempts
        self.add_pending(job)
        return True

    def purge(self, lane: str) -> int:
        heads = self.pending.get(lane, [])
        if not heads:
            return 0
        for _, jid in heads:
            self.jobs[jid].state = "dead"
            self.dead.add(jid)
        self.pending[lane] = []
        if lane in self.lroom and lane not in self.paused:
            self.lane_unring(self.lroom[lane], lane)
        return len(heads)


def token(job: Job) -> tuple[str, int]:
    return (job.id, job.attempts)


class LanesMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.runner = asyncio.Runner()
        self.client = aioredis.Redis.from_url(REDIS_URL)
        self.queue = "m" + uuid.uuid4().hex[:12]
        self.keys = Keys(self.queue)
        self.lanes = Lanes(self.client, self.queue)
        self.model = Model()
        self.held: list[Job] = []

    def run(self, coro: Any) -> Any:
        return self.runner.run(coro)

    def teardown(self) -> None:
        async def clean() -> None:
            keys = [k async for k in self.client.scan_iter(match=f"*{{{self.queue}}}*")]
            if keys:
                await self.client.delete(*keys)
            await self.client.aclose()

        try:
            self.run(clean())
        finally:
            self.runner.close()

    def step(self) -> None:
        STEPS["count"] += 1

    # -- producers --------------------------------------------------------------------------

    def _enqueue(
        self, lane: str, room: str, max_attempts: int, max_depth: int | None, dedupe: str | None
    ) -> None:
        payload = uuid.uuid4().bytes
        try:
            got: Any = self.run(
                self.lanes.enqueue(
                    room,
                    lane,
                    payload,
                    max_attempts=max_attempts,
                    max_depth=max_depth,
                    dedupe_key=dedupe,
                )
            )
        except LaneError as exc:
            got = type(exc)
        expected = self.model.enqueue(
            room,
            lane,
            got if isinstance(got, str) else "",
            payload,
            max_attempts,
            max_depth,
            dedupe,
        )
        assert got == expected

    @initialize(
        limits=st.lists(st.none() | st.integers(1, 3), min_size=len(ROOMS), max_size=len(ROOMS)),
        jobs=st.lists(st.tuples(st.sampled_from(LANES), st.integers(1, 3)), max_size=8),
    )
    def start(self, limits: list[int | None], jobs: list[tuple[str, int]]) -> None:
        """Ceilings on some rooms and a backlog: the interesting states come sooner."""
        for room, n in zip(ROOMS, limits, strict=True):
            if n is not None:
                self.run(self.lanes.limit(room, n))
                self.model.limit(room, n)
        for lane, max_attempts in jobs:
            room = self.model.lroom.get(lane, ROOMS[LANES.index(lane) % len(ROOMS)])
            self._enqueue(lane, room, max_attempts, None, None)

    @rule(
        lane=st.sampled_from(LANES),
        room=st.sampled_from(ROOMS),
        use_bound=st.sampled_from([True, True, True, False]),
        max_attempts=st.integers(1, 3),
        max_depth=st.none() | st.integers(1, 4),
        dedupe=st.none() | st.sampled_from(["u1", "u2", "u3", "u4"]),
    )
    def enqueue(
        self,
        lane: str,
        room: str,
        use_bound: bool,
        max_attempts: int,
        max_depth: int | None,
        dedupe: str | None,
    ) -> None:
        self.step()
        if use_bound:
            room = self.model.lroom.get(lane, room)
        self._enqueue(lane, room, max_attempts, max_depth, dedupe)

    @rule(lanes=st.lists(st.sampled_from(LANES), min_size=2, max_size=6))
    def enqueue_burst(self, lanes: list[str]) -> None:
        self.step()
        for lane in lanes:
            self._enqueue(lane, self.model.lroom.get(lane, ROOMS[0]), 2, None, None)

    # -- admit: a batch under a producer's guards (its keys: card, seats, bans) ---------------

    def own(self, name: str) -> str:
        return f"test:{{{self.queue}}}:{name}"

    @rule(field=st.sampled_from(["round", "ceiling"]), value=st.sampled_from(["1", "2", "3", "x"]))
    def producer_sets_its_card(self, field: str, value: str) -> None:
        self.step()
        self.run(self.client.hset(self.own("card"), field, value))
        self.model.card[field] = value

    @rule(user=st.sampled_from(["u1", "u2"]), banned=st.booleans())
    def producer_bans(self, user: str, banned: bool) -> None:
        self.step()
        if banned:
            self.run(self.client.sadd(self.own("bans"), user))
            self.model.bans.add(user)
        else:
            self.run(self.client.srem(self.own("bans"), user))
            self.model.bans.discard(user)

    @rule(
        jobs=st.lists(
            st.tuples(
                st.sampled_from(LANES),
                st.sampled_from(ROOMS),
                st.sampled_from([True, True, False]),  # the lane's own room
                st.none() | st.integers(1, 4),  # max_depth
                st.none() | st.sampled_from(["u1", "u2", "u3"]),  # dedupe
                st.sampled_from(["u1", "u2", "u3"]),  # the producer's user
                st.lists(st.sampled_from(["eq", "out", "nx"]), max_size=3, unique=True),
                st.sampled_from(["1", "2"]),  # the round the job wants
                st.sampled_from([None, 1, 1, 2]),  # default ceiling
                st.booleans(),  # ceiling from the card
            ),
            min_size=1,
            max_size=5,
        )
    )
    def admit(self, jobs: list[tuple[Any, ...]]) -> None:
        self.step()
        m = self.model
        batch = []
        for lane, room, use_bound, depth, dedupe, user, ops, want, ceiling, sourced in jobs:
            if use_bound:
                room = m.lroom.get(lane, room)
            guards = tuple(
                Guard("eq", self.own("card"), "round", want) if op == "eq"
                else Guard("out", self.own("bans"), user) if op == "out"
                else Guard("nx", self.own("seats"), user, lane)
                for op in ops
            )  # fmt: skip
            batch.append(
                Admission(
                    room, lane, uuid.uuid4().bytes, max_attempts=2, max_depth=depth,
                    dedupe_key=dedupe, guards=guards, ceiling=ceiling,
                    ceiling_from=(self.own("card"), "ceiling") if sourced else None,
                )
            )  # fmt: skip
        got = self.run(self.lanes.admit(batch))
        for a, admitted in zip(batch, got, strict=True):
            assert admitted.paused is (a.room in m.paused)
            if a.dedupe_key is not None and a.dedupe_key in m.dedupe:
                assert (admitted.status, admitted.job_id) == ("duplicate", m.dedupe[a.dedupe_key])
                continue
            refused = self._refusal(a.guards)
            if refused is not None:
                assert (admitted.status, admitted.guard, admitted.found) == ("refused", *refused)
                continue
            if a.ceiling is not None and a.room not in m.glimit:
                given = m.card.get("ceiling", "") if a.ceiling_from else ""
                m_ceiling = int(given) if given.isdigit() else a.ceiling
                m.limit(a.room, m_ceiling)
            expected = m.enqueue(
                a.room, a.lane, admitted.job_id or "", a.payload, a.max_attempts, a.max_depth,
                a.dedupe_key,
            )  # fmt: skip
            if expected is LaneFull:
                assert admitted.status == "full"
            elif expected is LaneError:
                assert admitted.status == "error"
            else:
                assert (admitted.status, admitted.job_id) == ("enqueued", expected)

    def _refusal(self, guards: tuple[Guard, ...]) -> tuple[int, str] | None:
        m = self.model
        for n, guard in enumerate(guards):
            if guard.op == "eq" and m.card.get(guard.field) != guard.value:
                return n, m.card.get(guard.field, "")
            if guard.op == "out" and guard.field in m.bans:
                return n, guard.field
            if guard.op == "nx":
                held = m.seats.setdefault(guard.field, guard.value)
                if held != guard.value:
                    return n, held
        return None

    # -- consumers --------------------------------------------------------------------------

    def _pick(self, data: st.DataObject) -> Job:
        """A job we hold: mostly a live lease, sometimes any (stale tokens included)."""
        live = [job for job in self.held if self.model.holds(job)]
        mostly_live: bool = data.draw(st.sampled_from([True, True, True, False]))
        if live and mostly_live:
            return data.draw(st.sampled_from(live))
        return data.draw(st.sampled_from(self.held))

    def _served(self, jobs: list[Job], expected: list[MJob]) -> None:
        assert [(j.id, j.room, j.lane, j.attempts, j.payload, j.seq) for j in jobs] == [
            (m.id, m.room, m.lane, m.attempts, m.payload, m.seq) for m in expected
        ]
        self.held.extend(jobs)

    @rule()
    def claim(self) -> None:
        self.step()
        job = self.run(self.lanes.claim(LEASE_MS))
        self._served([job] if job else [], self.model.serve(weighted=False))

    @rule()
    def wclaim(self) -> None:
        self.step()
        jobs = self.run(self.lanes.wclaim(LEASE_MS))
        self._served(jobs, self.model.serve(weighted=True))

    @precondition(lambda self: self.held)
    @rule(data=st.data())
    def ack(self, data: st.DataObject) -> None:
        self.step()
        job = self._pick(data)
        assert self.run(self.lanes.ack(job)) is self.model.ack(job)

    @precondition(lambda self: self.held)
    @rule(data=st.data())
    def ack_many(self, data: st.DataObject) -> None:
        self.step()
        live = [job for job in self.held if self.model.holds(job)]
        jobs = data.draw(st.lists(st.sampled_from(self.held), max_size=2, unique_by=token))
        if live:
            jobs += data.draw(st.lists(st.sampled_from(live), max_size=4, unique_by=token))
        jobs = list({token(job): job for job in jobs}.values())
        expected = self.model.ack_many(jobs)
        assert self.run(self.lanes.ack_many(jobs)) == expected

    @rule(data=st.data())
    def ack_wclaim(self, data: st.DataObject) -> None:
        self.step()
        live = [job for job in self.held if self.model.holds(job)]
        jobs = (
            data.draw(st.lists(st.sampled_from(live), max_size=4, unique_by=token)) if live else []
        )
        expected_acked = self.model.ack_many(jobs)
        acked, served, _ = self.run(self.lanes.ack_wclaim(jobs, LEASE_MS))
        assert acked == expected_acked
        self._served(served, self.model.serve(weighted=True))

    @rule(data=st.data(), wanted=st.integers(0, 4))
    def ack_wclaims(self, data: st.DataObject, wanted: int) -> None:
        """A pool's round: the acks, then `wanted` rota steps, stopping at the first empty."""
        self.step()
        live = [job for job in self.held if self.model.holds(job)]
        jobs = (
            data.draw(st.lists(st.sampled_from(live), max_size=4, unique_by=token)) if live else []
        )
        expected_acked = self.model.ack_many(jobs)
        acked, batches, _ = self.run(self.lanes.ack_wclaims(jobs, LEASE_MS, wanted))
        assert acked == expected_acked
        expected = []
        for _ in range(wanted):
            batch = self.model.serve(weighted=True)
            if not batch:
                break
            expected.append(batch)
        assert len(batches) == len(expected)
        for served, model in zip(batches, expected, strict=True):
            self._served(served, model)

    @precondition(lambda self: self.held)
    @rule(data=st.data())
    def retry(self, data: st.DataObject) -> None:
        self.step()
        job = self._pick(data)
        assert self.run(self.lanes.retry(job, DELAY_MS, "boom")) == self.model.retry(job)

    @precondition(lambda self: self.held)
    @rule(data=st.data())
    def extend(self, data: st.DataObject) -> None:
        self.step()
        job = self._pick(data)
        assert self.run(self.lanes.extend(job, LEASE_MS)) is self.model.holds(job)

    @precondition(lambda self: self.model.active)
    @rule(data=st.data())
    def expire_and_reap(self, data: st.DataObject) -> None:
        self.step()
        expired = st.sampled_from(self.model.by_seq(self.model.active))
        jids = data.draw(st.lists(expired, min_size=1, unique=True))

        async def go() -> int:
            await self.client.zadd(self.keys.active, {j: n for n, j in enumerate(jids, 1)})
            return await self.lanes.reap()

        assert self.run(go()) == len(jids)
        self.model.reap(jids)

    @precondition(lambda self: self.model.delayed)
    @rule(data=st.data())
    def due_and_promote(self, data: st.DataObject) -> None:
        self.step()
        due = st.sampled_from(self.model.by_seq(self.model.delayed))
        jids = data.draw(st.lists(due, min_size=1, unique=True))

        async def go() -> int:
            await self.client.zadd(self.keys.delayed, {j: n for n, j in enumerate(jids, 1)})
            return await self.lanes.promote()

        assert self.run(go()) == len(jids)
        self.model.promote(jids)

    @rule()
    def reap_and_promote_nothing_due(self) -> None:
        self.step()
        assert self.run(self.lanes.reap()) == 0
        assert self.run(self.lanes.promote()) == 0

    @rule()
    def park(self) -> None:
        self.step()
        expected = self.model.wake > 0
        self.model.wake = max(0, self.model.wake - 1)
        assert self.run(self.lanes.park(0.01)) is expected

    # -- admin ------------------------------------------------------------------------------

    @rule(room=st.sampled_from(ROOMS), n=st.none() | st.integers(1, 4))
    def limit(self, room: str, n: int | None) -> None:
        self.step()
        self.run(self.lanes.unlimit(room) if n is None else self.lanes.limit(room, n))
        self.model.limit(room, n)

    @rule(lane=st.sampled_from(LANES), w=st.integers(1, 4))
    def weight(self, lane: str, w: int) -> None:
        self.step()
        self.run(self.lanes.weight(lane, w))
        if w == 1:
            self.model.gweight.pop(lane, None)
        else:
            self.model.gweight[lane] = w

    @rule(x=st.sampled_from(ROOMS + LANES), on=st.booleans())
    def pause_or_resume(self, x: str, on: bool) -> None:
        self.step()
        if on:
            self.run(self.lanes.pause(x))
            self.model.pause(x)
        else:
            self.run(self.lanes.resume(x))
            self.model.resume(x)

    @rule(on=st.booleans())
    def pause_or_resume_queue(self, on: bool) -> None:
        self.step()
        if on:
            self.run(self.lanes.pause_queue())
            self.model.qpaused = True
        else:
            self.run(self.lanes.resume_queue())
            if self.model.qpaused:
                self.model.qpaused = False
                if self.model.ring:
                    self.model.push_wake()

    @precondition(lambda self: self.model.jobs)
    @rule(data=st.data(), lane=st.sampled_from(LANES))
    def reassign(self, data: st.DataObject, lane: str) -> None:
        self.step()
        jid = data.draw(st.sampled_from(self.model.by_seq(self.model.jobs)))
        try:
            got: Any = self.run(self.lanes.reassign(jid, lane))
        except LaneError as exc:
            got = type(exc)
        assert got == self.model.reassign(jid, lane)

    @rule(lane=st.sampled_from(LANES))
    def purge(self, lane: str) -> None:
        self.step()
        assert self.run(self.lanes.purge(lane)) == self.model.purge(lane)

    @precondition(lambda self: self.model.dead)
    @rule(data=st.data())
    def requeue(self, data: st.DataObject) -> None:
        self.step()
        jid = data.draw(st.sampled_from(self.model.by_seq(self.model.dead)))
        try:
            got: Any = self.run(self.lanes.requeue(jid))
        except LaneError as exc:
            got = type(exc)
        assert got == self.model.requeue(jid)

    # -- retention: time passes ---------------------------------------------------------------

    @precondition(lambda self: self.model.dead)
    @rule(data=st.data(), keep=st.integers(0, 4))
    def dead_jobs_age_and_are_trimmed(self, data: st.DataObject, keep: int) -> None:
        self.step()
        dead = self.model.by_seq(self.model.dead)
        old = data.draw(st.lists(st.sampled_from(dead), unique=True))
        recent = [jid for jid in dead if jid not in old]
        retain = Lanes(
            self.client, self.queue, dead_max=keep, dead_age_ms=HOUR_MS, lane_idle_ms=FOREVER_MS
        )

        async def go() -> tuple[int, int]:
            secs, micros = await self.client.time()
            now = secs * 1000 + micros // 1000
            # time of death: `old` two hours ago, the rest just now, in mint order
            scores = {jid: now - 2 * HOUR_MS + n for n, jid in enumerate(old)}
            scores |= {jid: now + n for n, jid in enumerate(recent)}
            await self.client.zadd(self.keys.dead, scores, xx=True)
            return await retain.retain()

        got = self.run(go())
        assert got == (len(self.model.trim_dead(old, recent, keep)), 0)

    @precondition(lambda self: self.model.lroom)
    @rule(data=st.data())
    def lanes_idle_and_are_forgotten(self, data: st.DataObject) -> None:
        self.step()
        bound = sorted(self.model.lroom)
        due = data.draw(st.lists(st.sampled_from(bound), min_size=1, unique=True))
        retain = Lanes(self.client, self.queue, dead_age_ms=FOREVER_MS, lane_idle_ms=HOUR_MS)

        async def go() -> tuple[int, int]:
            # their last enqueue: long ago (the others' was during this run)
            await self.client.zadd(self.keys.lseen, {ln: n for n, ln in enumerate(due, 1)}, xx=True)
            return await retain.retain()

        got = self.run(go())
        assert got == (0, len(self.model.forget(due)))

    @rule(room=st.sampled_from(ROOMS))
    def snapshot_lists_the_lanes_with_work(self, room: str) -> None:
        self.step()
        view = self.run(self.lanes.snapshot(room))["rooms"][room]
        m = self.model
        assert view["lanes"] == {
            lane: {"depth": len(jobs), "weight": m.gweight.get(lane, 1), "paused": lane in m.paused}
            for lane, jobs in m.pending.items()
            if jobs and m.lroom.get(lane) == room
        }
        assert view["ring"] == m.lanering.get(room, [])

    @rule()
    def repair_finds_nothing(self) -> None:
        self.step()
        assert self.run(self.lanes.repair()) == []

    # -- the comparison -----------------------------------------------------------------------

    @invariant()
    def keyspace_matches_the_model(self) -> None:
        m = self.model
        k = self.keys

        async def read() -> list[Any]:
            pipe = self.client.pipeline(transaction=True)
            pipe.lrange(k.ring, 0, -1)
            for room in ROOMS:
                pipe.lrange(k.lane_ring(room), 0, -1)
            for lane in LANES:
                pipe.zrange(k.pending(lane), 0, -1, withscores=True)
            for name in (k.active, k.delayed, k.dead):
                pipe.zrange(name, 0, -1)
            for name in (k.gactive, k.glimit, k.gweight, k.lroom, k.ldelayed):
                pipe.hgetall(name)
            pipe.zrange(k.lseen, 0, -1)
            for room in ROOMS:
                pipe.smembers(k.room_lanes(room))
                pipe.smembers(k.room_held(room))
            pipe.smembers(k.paused)
            pipe.exists(k.qpaused)
            pipe.llen(k.wake)
            pipe.get(k.seq)
            pipe.get(k.npending)
            pipe.zrange(k.rdepth, 0, -1, withscores=True)
            pipe.zrange(k.lhead, 0, -1, withscores=True)
            jids = sorted(m.jobs)
            for jid in jids:
                pipe.hmget(k.job(jid), "t", "a", "l")
            return list(await pipe.execute())

        got = self.run(read())
        # the deep check also SCANs the shared database: every 10th step is enough for the
        # orphans only it can see (a leftover job hash would be one)
        assert self.run(self.lanes.check(deep=STEPS["count"] % 10 == 0)) == []

        def s(x: bytes) -> str:
            return x.decode()

        ring, got = got[0], got[1:]
        assert [s(r) for r in ring] == m.ring
        for room in ROOMS:
            assert [s(x) for x in got.pop(0)] == m.lanering.get(room, []), room
        for lane in LANES:
            assert [(int(sc), s(x)) for x, sc in got.pop(0)] == m.pending.get(lane, []), lane
        active, delayed, dead = ({s(x) for x in got.pop(0)} for _ in range(3))
        assert (active, delayed, dead) == (m.active, m.delayed, m.dead)
        gactive, glimit, gweight, lroom, ldelayed = (
            {s(a): s(b) for a, b in got.pop(0).items()} for _ in range(5)
        )
        expected_active = {r: str(m.gactive(r)) for r in ROOMS if m.gactive(r)}
        assert gactive == expected_active
        assert glimit == {r: str(n) for r, n in m.glimit.items()}
        assert gweight == {ln: str(w) for ln, w in m.gweight.items()}
        assert lroom == m.lroom
        delayed_lanes = {m.jobs[jid].lane for jid in m.delayed}
        assert ldelayed == {ln: str(m.delayed_of(ln)) for ln in delayed_lanes}
        assert {s(x) for x in got.pop(0)} == set(m.lroom)  # lseen: every lane remembered
        for room in ROOMS:
            assert {s(x) for x in got.pop(0)} == {ln for ln, r in m.lroom.items() if r == room}
            assert {s(x) for x in got.pop(0)} == m.held(room), room
        assert {s(x) for x in got.pop(0)} == m.paused
        assert bool(got.pop(0)) is m.qpaused
        assert got.pop(0) == m.wake
        seq = got.pop(0)
        assert int(seq or 0) == m.seq
        # the operators' books: pending in all, per room, and each lane's head seq
        npending, rdepth, lhead = got.pop(0), got.pop(0), got.pop(0)
        waiting = {ln: q for ln, q in m.pending.items() if q}
        depth: dict[str, int] = {}
        for q in waiting.values():
            for _, jid in q:
                depth[m.jobs[jid].room] = depth.get(m.jobs[jid].room, 0) + 1
        assert int(npending or 0) == sum(depth.values())
        assert {s(r): int(n) for r, n in rdepth} == depth
        assert {s(ln): int(h) for ln, h in lhead} == {ln: q[0][0] for ln, q in waiting.items()}
        for jid in sorted(m.jobs):
            job = m.jobs[jid]
            state, attempts, lane = got.pop(0)
            assert (s(state), int(attempts or 0), s(lane)) == (job.state, job.attempts, job.lane)
        assert not got


EXAMPLES = int(os.environ.get("LANES_MODEL_EXAMPLES", "50"))
MIN_STEPS = 60 * EXAMPLES  # 3,000 by default
SETTINGS = settings(
    max_examples=EXAMPLES,
    stateful_step_count=80,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    # A failure prints its steps; replaying saved examples first would make every later
    # run pay for old (possibly long) ones.
    database=None,
)


# A failure is reported after at most about 5 minutes of shrinking: hypothesis stops
# shrinking there by itself (MAX_SHRINKING_SECONDS, on purpose not a setting) and prints
# the smallest case found so far, which for this machine is already a handful of steps.
# The timeout leaves room for that on a loaded 2-core machine, where a round trip can take
# 10x its usual time.
@pytest.mark.timeout(900)
def test_lanes_model() -> None:
    """Runs the machine and proves it took at least MIN_STEPS steps, whatever else runs.

    Hypothesis ends an example early now and then (it must be able to, to shrink a failure
    to fewer steps), so EXAMPLES examples of up to 80 steps take from about 2,900 to 3,500
    steps; when a run falls short, a few more examples make up the difference."""
    STEPS["count"] = 0
    run_state_machine_as_test(LanesMachine, settings=SETTINGS)
    for _ in range(2):
        if STEPS["count"] >= MIN_STEPS:
            break
        top_up = settings(SETTINGS, max_examples=max(1, EXAMPLES // 5))
        run_state_machine_as_test(LanesMachine, settings=top_up)
    print(f"model-based test: {STEPS['count']} steps")
    assert STEPS["count"] >= MIN_STEPS
