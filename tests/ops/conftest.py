"""Fixtures of the ops tests: the session's migrated database, reading /metrics, and the ops
page on a test server (`serve_ops`)."""

from __future__ import annotations

import ipaddress
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass

import aiohttp
import pytest
import pytest_asyncio
import redis.asyncio as aioredis
from aiohttp.test_utils import TestServer
from prometheus_client.parser import text_string_to_metric_families

from codemojex.db import make_sessionmaker, upgrade
from codemojex.db.engine import make_engine
from codemojex.lanes import Lanes
from codemojex.ops.page.app import OpsPage
from codemojex.ops.page.auth import LoginBudget
from codemojex.ops.page.history import History
from codemojex.ops.page.proxies import TrustedProxies
from tests.conftest import REDIS_URL
from tests.helpers.support import drop_keys, wipe_tables

Series = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture(scope="module")
def _migrated_url(pg_database_url: str) -> str:
    upgrade(pg_database_url)
    return pg_database_url


@pytest_asyncio.fixture
async def ops_database_url(_migrated_url: str) -> AsyncIterator[str]:
    """The session's database at head, emptied first: a worker this test starts must not find
    unsent outbox rows another test left (it would try to post them to a Telegram not there)."""
    engine = make_engine(_migrated_url)
    try:
        await wipe_tables(engine)
    finally:
        await engine.dispose()
    yield _migrated_url


async def scrape(port: int) -> Series:
    """Every sample of http://127.0.0.1:port/metrics: (name, sorted labels) -> value."""
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}/metrics") as r:
        assert r.status == 200
        text = await r.text()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


async def exported(port: int) -> set[str]:
    """Every family and sample name /metrics declares (a family may have no sample yet)."""
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}/metrics") as r:
        text = await r.text()
    names: set[str] = set()
    for family in text_string_to_metric_families(text):
        names |= {family.name, *(s.name for s in family.samples)}
    return names


def value(series: Series, name: str, **labels: str) -> float:
    return series.get((name, tuple(sorted(labels.items()))), 0.0)


def moved(before: Series, after: Series, name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


def families(series: Mapping[tuple[str, tuple[tuple[str, str], ...]], float], prefix: str) -> int:
    return sum(1 for name, _ in series if name.startswith(prefix))


async def status(port: int, path: str) -> tuple[int, dict[str, object]]:
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}{path}") as r:
        return r.status, await r.json()


# --- the ops page on a test server ----------------------------------------------------------

OPS_TOKEN = "Vq3Zr8-kP1xN_t7Lm2Hw9sYc4BfJd6Ge0aUo5RiQ"


@dataclass
class Served:
    """An ops page on a test server: its base URL, the page object, its lanes."""

    url: str
    page: OpsPage
    lanes: Lanes

    async def login(self, http: aiohttp.ClientSession, **headers: str) -> str:
        """Log in as "Ann"; the session id (the cookie's value, whatever its name)."""
        async with http.post(
            f"{self.url}/login",
            data={"name": "Ann", "token": OPS_TOKEN},
            headers=headers,
            allow_redirects=False,
        ) as r:
            assert r.status == 303, await r.text()
            (morsel,) = r.cookies.values()
            return morsel.value


@asynccontextmanager
async def serve_ops(
    database_url: str,
    queue: str,
    *,
    proxies: Sequence[str] = (),
    budget: LoginBudget | None = None,
) -> AsyncIterator[Served]:
    """The ops page of `queue` on a test server of its own (127.0.0.1, a free port)."""
    redis = aioredis.Redis.from_url(REDIS_URL)
    engine = make_engine(database_url)
    lanes = Lanes(redis, queue)
    sm = make_sessionmaker(engine)
    page = OpsPage(
        lanes,
        sm,
        History(lanes, sm, redis, queue),
        OPS_TOKEN,
        proxies=TrustedProxies([ipaddress.ip_network(p) for p in proxies]),
        budget=budget,
    )
    server = TestServer(page.app(), host="127.0.0.1")
    await server.start_server()
    try:
        yield Served(str(server.make_url("")).rstrip("/"), page, lanes)
    finally:
        await server.close()
        await drop_keys(redis, queue)
        await engine.dispose()
        await redis.aclose()
