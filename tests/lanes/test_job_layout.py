"""The job hash (docs/lanes.md, "The job hash"): compact, deduplicating by a derived job id,
and read in its older layout too.

- A producer that derives the job id from the job's origin needs no dedupe key: a second
  admission of the same id is a duplicate, answered before the guards (whatever they say now)
  and writing nothing.
- A pending guess costs at most 300 bytes of Redis in all (MEMORY USAGE: its job hash and its
  member of the lane's pending set; no dedupe key), on the real Redis.
- A job written by an older version (long field names, `attempts` 0 written at enqueue) is
  served, retried, reaped, dead-lettered, reassigned, purged and requeued by the current
  scripts, read and written in its own layout, never rewritten (an older worker may still
  read it: tests/lanes/test_rolling_deploy.py), and `check()` stays clean; `repair()` alone
  upgrades it.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis

from codemojex.bot.guesses import GUESS_ATTEMPTS
from codemojex.lanes import Admission, Guard, Lanes
from codemojex.lanes import keys as K
from codemojex.lanes.admission import DEPTH
from codemojex.settings import Settings
from codemojex.values import ids
from codemojex.values.jobs import GuessJob
from tests.conftest import REDIS_URL
from tests.helpers.support import drop_keys
from tests.lanes.conftest import Env

# The older layout's names, as an older bot wrote them (lua/includes/upgrade_job.lua).
OLD_NAMES = {short: long for long, short in K.JOB_FIELDS.items()}


def room() -> str:
    return ids.mint(ids.ROOM)


def lane() -> str:
    return ids.mint(ids.PLAYER)


async def test_a_derived_job_id_admitted_again_is_a_duplicate_before_its_guards(env: Env) -> None:
    r, a = room(), lane()
    card = f"test:{{{env.queue}}}:card"
    await env.client.hset(card, "round", "7")
    job_id = ids.derived(ids.JOB, "m:-100:42:1700000000")
    guard = Guard("eq", card, "round", "7")
    (first,) = await env.lanes.admit([Admission(r, a, b"g", job_id=job_id, guards=(guard,))])
    assert (first.status, first.job_id) == ("enqueued", job_id)
    before = await env.dump()
    assert not [k for k in before if k.startswith("dd:")]  # the job hash is the dedupe
    await env.client.hset(card, "round", "8")  # the round moved on: the guard would refuse
    (again,) = await env.lanes.admit([Admission(r, a, b"g", job_id=job_id, guards=(guard,))])
    assert (again.status, again.job_id) == ("duplicate", job_id)
    assert await env.dump() == before
    # A second producer that minted another lane for the same origin (two bot processes, a new
    # player): the same job, not an error, whatever the lane.
    (other,) = await env.lanes.admit([Admission(r, lane(), b"g", job_id=job_id)])
    assert (other.status, other.job_id) == ("duplicate", job_id)
    assert await env.dump() == before
    assert await env.lanes.check() == []


async def test_the_same_origin_gives_the_same_valid_job_id() -> None:
    one = ids.derived(ids.JOB, "cb:4382bfdwdsb323b2d9")
    assert one == ids.derived(ids.JOB, "cb:4382bfdwdsb323b2d9")
    assert one != ids.derived(ids.JOB, "cb:4382bfdwdsb323b2d8")
    assert ids.is_valid(one, ids.JOB) and K.check_job(one) == one
    with pytest.raises(ValueError):
        ids.derived(ids.JOB, "")


@pytest.fixture
async def default_length_queue() -> AsyncIterator[tuple[aioredis.Redis, str]]:
    """A queue whose name is as long as the default's ("cm"): every key carries the name, so
    the bytes per guess are the deployment's."""
    client = aioredis.Redis.from_url(REDIS_URL)
    queue = secrets.choice("abdefghijkmnopqrstuvwxyz") + secrets.choice("0123456789")
    assert len(queue) == len(str(Settings.model_fields["queue"].default))
    await drop_keys(client, queue)
    try:
        yield client, queue
    finally:
        await drop_keys(client, queue)
        await client.aclose()


async def test_a_pending_guess_costs_at_most_300_bytes(
    default_length_queue: tuple[aioredis.Redis, str],
) -> None:
    client, queue = default_length_queue
    lanes = Lanes(client, queue)
    r, a = room(), lane()
    keys = K.Keys(queue)

    async def total() -> int:
        used = 0
        async for key in client.scan_iter(match=keys.prefix + "*", count=1000):
            used += int(await client.memory_usage(key) or 0)
        return used

    def guess(n: int) -> Admission:
        # A guess as the bot stores it: a six-digit round and message, a ten-digit user, four
        # emojis, its job id derived from the message.
        payload = GuessJob(123_456, 654_321 + n, ("🍎", "🍌", "🍇", "🍒"), user_id=5_123_456_789)
        origin = f"m:-1001234567890:{654_321 + n}:1760000000"
        return Admission(
            r, a, payload.encode(), max_attempts=GUESS_ATTEMPTS,
            max_depth=DEPTH, job_id=ids.derived(ids.JOB, origin),
        )  # fmt: skip

    await lanes.admit([guess(0)])
    one = await total()
    n = DEPTH
    got = await lanes.admit([guess(i) for i in range(1, n)])
    assert {x.status for x in got} == {"enqueued"}
    per_guess = (await total() - one) / (n - 1)
    job_hash = int(await client.memory_usage(keys.job(str(got[0].job_id))) or 0)
    assert not [k async for k in client.scan_iter(match=keys.prefix + "dd:*")]
    assert (await client.object("encoding", keys.job(str(got[0].job_id)))) == b"listpack"
    print(f"a pending guess: {per_guess:.0f} B in all, its job hash {job_hash} B")
    assert per_guess <= 300, (per_guess, job_hash)


async def as_older_version_wrote_it(env: Env, job_id: str) -> None:
    """Rewrite a job's hash as an older version wrote it (long names, attempts 0 at enqueue)."""
    key = env.keys.job(job_id)
    raw: dict[Any, Any] = await env.client.hgetall(key)
    fields: dict[Any, Any] = {OLD_NAMES[k.decode()]: v for k, v in raw.items()}
    fields.setdefault("attempts", 0)
    await env.client.delete(key)
    await env.client.hset(key, mapping=fields)


async def test_jobs_of_the_older_layout_are_served_in_it_never_rewritten(env: Env) -> None:
    r, a = room(), lane()
    first = await env.lanes.enqueue(r, a, b"one", max_attempts=2)
    second = await env.lanes.enqueue(r, a, b"two", max_attempts=1)
    for job_id in (first, second):
        await as_older_version_wrote_it(env, job_id)
    assert await env.lanes.check() == []  # check reads either layout
    stats = await env.lanes.stats()
    assert stats.pending == 2 and stats.oldest_ms is not None and stats.oldest_ms > 0
    assert (await env.lanes.waiting_before({r: 10**13}))[1] == {r}
    enqueued = (await env.dump())[f"job:{first}"]["enqueued_ms"]

    job = await env.lanes.claim(30_000)
    assert job is not None and (job.id, job.payload, job.attempts) == (first, b"one", 1)
    assert (await env.dump())[f"job:{first}"] == {
        "payload": "one", "room": r, "lane": a, "seq": "1", "attempts": "1",
        "max_attempts": "2", "state": "active", "enqueued_ms": enqueued,
    }  # fmt: skip
    assert await env.lanes.extend(job, 30_000)
    assert await env.lanes.retry(job, 0, "later") == "delayed"
    assert (await env.dump())[f"job:{first}"]["last_error"] == "later"
    assert await env.lanes.promote() == 1
    job = await env.lanes.claim(30_000)
    assert job is not None and (job.id, job.attempts) == (first, 2)
    assert await env.lanes.ack(job)

    # The second, still in the older layout: leased, its lease runs out, it dies (1 attempt);
    # an operator reads it among the dead and requeues it, then moves it to another lane and
    # purges that lane (a ban).
    job = await env.lanes.claim(30_000)
    assert job is not None and (job.id, job.payload) == (second, b"two")
    await env.expire(second)
    assert await env.lanes.reap() == 1
    total, dead = await env.lanes.dead()
    assert total == 1 and (dead[0].id, dead[0].last_error) == (second, "lease expired")
    assert await env.lanes.requeue(second)
    other = lane()
    assert await env.lanes.reassign(second, other)
    assert await env.lanes.purge(other) == 1
    fields = (await env.dump())[f"job:{second}"]
    assert set(fields) == set(K.JOB_FIELDS)  # every write in the older layout, none short
    assert (fields["state"], fields["lane"], fields["last_error"]) == ("dead", other, "purged")
    assert await env.lanes.requeue(second)
    assert await env.lanes.check() == []
    job = await env.lanes.claim(30_000)
    assert job is not None and job.id == second and await env.lanes.ack(job)
    assert await env.lanes.check() == []
    assert not [k for k in await env.dump() if k.startswith("job:")]


async def test_repair_upgrades_every_older_job(env: Env) -> None:
    r, a = room(), lane()
    pending = await env.lanes.enqueue(r, a, b"pending")
    current = await env.lanes.enqueue(r, a, b"current")
    await as_older_version_wrote_it(env, pending)
    assert await env.lanes.repair() == [f"upgraded job {pending} to the short field names"]
    assert await env.lanes.repair() == []
    dumped = await env.dump()
    assert set(dumped[f"job:{pending}"]) == {"p", "r", "l", "s", "a", "m", "t", "e"}
    assert dumped[f"job:{pending}"]["a"] == "0" and "a" not in dumped[f"job:{current}"]


async def test_an_older_job_left_misplaced_is_repaired_in_the_current_layout(env: Env) -> None:
    r, a = room(), lane()
    job_id = await env.lanes.enqueue(r, a, b"old")
    await as_older_version_wrote_it(env, job_id)
    await env.client.hset(env.keys.job(job_id), "state", "active")  # its state is wrong
    assert await env.lanes.check() != []
    assert await env.lanes.repair() != []
    assert await env.lanes.check() == []
    fields = (await env.dump())[f"job:{job_id}"]
    assert fields["t"] == "pending" and "state" not in fields and fields["p"] == "old"
