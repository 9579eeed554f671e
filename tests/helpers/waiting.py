"""Waiting for what a component shows only through its state (counters, lists it fills)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


async def until(probe: Callable[[], bool], timeout_s: float = 10.0) -> None:
    """Until `probe()` holds, looked at every few milliseconds; fails past `timeout_s`."""
    async with asyncio.timeout(timeout_s):
        while not probe():  # noqa: ASYNC110
            await asyncio.sleep(0.005)
