"""Fixtures of the ops tests: the session's migrated database, and reading /metrics."""

from __future__ import annotations

from collections.abc import Mapping

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from codemojex.db import upgrade

Series = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture(scope="module")
def ops_database_url(pg_database_url: str) -> str:
    upgrade(pg_database_url)
    return pg_database_url


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
