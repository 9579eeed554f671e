"""Fixtures of the ops tests: the session's migrated database, and reading /metrics."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping

import aiohttp
import pytest
import pytest_asyncio
from prometheus_client.parser import text_string_to_metric_families

from codemojex.db import upgrade
from codemojex.db.engine import make_engine
from tests.support import wipe_tables

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
