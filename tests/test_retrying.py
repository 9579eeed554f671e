"""One way to retry (codemojex.outages.retrying) and one way to go on without
(OUTAGES.swallow), against real failures: a Redis nobody listens on, then the real one."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis
import redis.exceptions

from codemojex.limits import RetryPolicy
from codemojex.outages import OUTAGES, OutageLasted, outage_of, pause_s, retrying
from tests.helpers.support import free_port

FAST = RetryPolicy("test_fast", base_s=0.02, cap_s=0.05)


@pytest.fixture(autouse=True)
def _no_outage_open() -> None:
    OUTAGES.reset()


@pytest.fixture
async def down() -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(f"redis://127.0.0.1:{free_port()}/0")
    yield client
    await client.aclose()


@pytest.fixture
async def up() -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url("redis://127.0.0.1:6379/0")
    yield client
    await client.aclose()


def test_the_pauses_double_up_to_the_cap_and_jitter_stays_within() -> None:
    assert [pause_s(FAST, n) for n in (1, 2, 3, 4)] == [0.02, 0.04, 0.05, 0.05]
    jittered = RetryPolicy("j", base_s=0.5, cap_s=30.0, jitter=True, floor_s=0.2)
    rng = random.Random(7)
    for n in range(1, 12):
        pause = pause_s(jittered, n, rng)
        assert 0.2 <= pause <= min(30.0, 0.5 * 2 ** (n - 1))


async def test_a_bug_is_raised_at_once_untried() -> None:
    calls = 0

    async def buggy() -> None:
        nonlocal calls
        calls += 1
        raise KeyError("a bug")

    with pytest.raises(KeyError):
        await retrying("redis", FAST, where="a test")(buggy)()
    assert calls == 1
    assert OUTAGES.retried[FAST.name] == 0
    assert not OUTAGES.is_open("redis")


async def test_an_outage_is_retried_with_the_policy_logged_and_counted(
    down: aioredis.Redis, up: aioredis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    """Two attempts meet a Redis nobody listens on, the third the real one."""
    clients = [down, down, up]
    seen: list[int] = []
    failures: list[BaseException] = []

    async def ping() -> bool:
        seen.append(len(seen))
        return bool(await clients[len(seen) - 1].ping())

    started = OUTAGES.started["redis"]
    with caplog.at_level(logging.WARNING, logger="codemojex.outages"):
        ok = await retrying("redis", FAST, where="a test", on_failure=failures.append)(ping)()
    assert ok is True
    assert len(seen) == 3
    assert OUTAGES.retried[FAST.name] == 2  # codemojex_retries_total{policy="test_fast"}
    assert OUTAGES.started["redis"] == started + 1  # one outage, however many attempts
    assert [type(exc) for exc in failures] == [redis.exceptions.ConnectionError] * 2
    lines = [r.getMessage() for r in caplog.records]
    assert sum("redis unavailable" in line and "a test" in line for line in lines) == 1
    assert sum("redis back after" in line and "2 failed attempts" in line for line in lines) == 1
    assert not OUTAGES.is_open("redis")


async def test_an_outage_that_lasts_gives_up_after_the_policy(down: aioredis.Redis) -> None:
    brief = RetryPolicy("test_brief", base_s=0.02, cap_s=0.05, give_up_s=0.2)
    with pytest.raises(OutageLasted) as raised:
        await retrying("redis", brief, where="a test")(down.ping)()
    assert isinstance(raised.value.__cause__, redis.exceptions.ConnectionError)
    # still an outage of the component to whoever catches it further up
    assert outage_of(raised.value) == "redis"
    assert 3 <= OUTAGES.retried[brief.name] <= 12
    assert OUTAGES.is_open("redis")


async def test_stopping_ends_the_wait(down: aioredis.Redis) -> None:
    patient = RetryPolicy("test_patient", base_s=30.0, cap_s=30.0)  # never gives up by itself
    stop, failed = asyncio.Event(), asyncio.Event()
    wrap = retrying("redis", patient, where="a test", stop=stop, on_failure=lambda _: failed.set())
    task = asyncio.create_task(wrap(down.ping)())
    await asyncio.wait_for(failed.wait(), 5)  # it failed once and now waits its 30 s
    stop.set()
    with pytest.raises(OutageLasted):
        await asyncio.wait_for(task, 5)


async def test_what_a_caller_goes_on_without_is_logged_and_counted(
    down: aioredis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="codemojex.outages"):
        try:
            await down.delete("a marker")
        except Exception as exc:
            OUTAGES.swallow(exc, "a test", "a marker not deleted")
        try:
            raise KeyError("a bug")
        except Exception as exc:
            OUTAGES.swallow(exc, "a test", "a bug's cleanup")
    assert OUTAGES.swallowed["a test"] == 2  # codemojex_swallowed_total{where="a test"}
    outage, bug = (r for r in caplog.records if "going on without it" in r.getMessage())
    assert outage.levelno == logging.WARNING and outage.exc_info is None
    assert "a marker not deleted" in outage.getMessage()
    assert bug.levelno == logging.ERROR and bug.exc_info is not None
