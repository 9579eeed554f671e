"""Stopping a process's background tasks (`runtime.stop_tasks`): every one ends, also one
that swallows its cancellation, which a plain cancel-and-gather would wait for forever (a bot
that never stops on SIGTERM)."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import pytest

from codemojex.runtime import stop_tasks


async def _swallows_once(ended: asyncio.Event) -> None:
    # As a library catching the cancellation while its own wait completes.
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.sleep(3600)
    try:
        await asyncio.sleep(3600)
    finally:
        ended.set()


async def test_a_task_that_swallows_its_cancellation_is_cancelled_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ended = asyncio.Event()
    stubborn = asyncio.create_task(_swallows_once(ended), name="stubborn")
    plain = asyncio.create_task(asyncio.sleep(3600), name="plain")
    finished = asyncio.create_task(asyncio.sleep(0), name="finished")
    await asyncio.sleep(0)
    with caplog.at_level(logging.WARNING, logger="codemojex.runtime"):
        async with asyncio.timeout(5):
            await stop_tasks([stubborn, plain, finished], again_s=0.05)
    assert ended.is_set() and stubborn.cancelled() and plain.cancelled() and finished.done()
    assert "task stubborn went on after its cancellation" in caplog.text
    assert "plain" not in caplog.text


async def _never_stops(released: asyncio.Event) -> None:
    while not released.is_set():
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(3600)


async def test_a_task_that_never_stops_is_left_behind_and_named(
    caplog: pytest.LogCaptureFixture,
) -> None:
    released = asyncio.Event()
    endless = asyncio.create_task(_never_stops(released), name="endless")
    await asyncio.sleep(0)
    with caplog.at_level(logging.WARNING, logger="codemojex.runtime"):
        async with asyncio.timeout(5):
            await stop_tasks([endless], again_s=0.01, tries=3)
    assert not endless.done()
    assert caplog.text.count("task endless went on after its cancellation") == 3
    assert "task endless would not stop; left behind" in caplog.text
    released.set()  # (the test's own task ends, so that the test's loop can close)
    endless.cancel()
    await endless
