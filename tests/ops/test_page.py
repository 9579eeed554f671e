"""The ops page in a real browser (headless Chromium from Debian, driven by Selenium), on a
real run of the bot and the worker on the Bot API stand-in: an operator is refused with a
wrong token, logs in, finds a room, pauses it (its guesses wait while another room's are
scored), and resumes it (they are scored). A screenshot is kept: tmp_path always, and
CODEMOJEX_OPS_SCREENSHOT=<path> also writes it there (docs/ops-page.png is made so).

It may skip only where Chromium is not installed, and never in CI (CI=1 makes it fail)."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import pytest
from pydantic import SecretStr
from sqlalchemy import func, select

from codemojex.db import AuditLog, Guess
from codemojex.ops.collect import BotCollector, WorkerCollector
from codemojex.ops.page.main import run_ops
from codemojex.ops.server import ProcessOps
from codemojex.settings import Settings
from tests.e2e.conftest import open_stack
from tests.e2e.harness import ALICE, BOB, Stack, eventually, in_process_worker
from tests.helpers.support import free_port, wrong_guess
from tests.ops.browser import Browser, missing

TOKEN = "Kd4-rW8_nQ1zX6mV3pL9sH2bF7gJ5cY0aT-eN"  # a strong one: the page starts only with one


def require_browser() -> None:
    why = missing()
    if why is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the browser test: {why}")
    pytest.skip(why)


@asynccontextmanager
async def ops_page(settings: Settings) -> AsyncIterator[str]:
    stop = asyncio.Event()
    task = asyncio.create_task(run_ops(settings.ops_page(), settings.runtime(), stop))

    async def up() -> bool:
        try:
            url = f"http://127.0.0.1:{settings.ops_port}/login"
            async with aiohttp.ClientSession() as http, http.get(url) as r:
                return r.status == 200
        except OSError:
            return False

    try:
        await eventually(up, timeout=20, what="the ops page up")
        yield f"http://127.0.0.1:{settings.ops_port}"
    finally:
        stop.set()
        await asyncio.wait_for(task, 20)


async def scored_in(stack: Stack, round_id: int) -> int:
    stmt = select(func.count()).select_from(Guess).where(Guess.round_id == round_id)
    return int(await stack.scalar(stmt))


async def test_an_operator_pauses_and_resumes_a_room_in_a_browser(
    ops_database_url: str, queue_name: str, tmp_path: Path
) -> None:
    require_browser()
    async with open_stack(ops_database_url, queue_name) as stack, in_process_worker(stack) as stats:
        publishers = [  # as `codemojex bot` and `codemojex worker` do: the page charts them
            ProcessOps(kind, stack.settings.metrics(), redis=stack.redis, engine=stack.engine,
                       sessionmaker=stack.sessionmaker, lanes=stack.lanes, collectors=[c])
            for kind, c in (("bot", BotCollector(stack.app.bot_data.guesses.outcomes)),
                            ("worker", WorkerCollector(stats)))
        ]  # fmt: skip
        for ops in publishers:
            await ops.start()
        settings = stack.settings.model_copy(
            update={"ops_token": SecretStr(TOKEN), "ops_port": free_port()}
        )
        browser: Browser | None = None
        try:
            async with ops_page(settings) as base:
                hold, other = stack.new_group(), stack.new_group()
                (ann_h, rnd_h), (ann_o, rnd_o) = [await stack.new_round(c) for c in (hold, other)]
                for chat, ann, rnd in ((hold, ann_h, rnd_h), (other, ann_o, rnd_o)):
                    guess = "".join(wrong_guess(rnd.secret_emojis, ann.palette, 0))
                    mid = stack.standin.send_text(chat, ALICE, guess)
                    await stack.result(chat, mid, "Alice", guess)
                room = await stack.room_id(hold)

                browser = await asyncio.to_thread(Browser, tmp_path / "profile")
                await browser.get(base + "/")  # not logged in: the login form
                await browser.type("#name", "Olga Ops")
                await browser.type("#token", "not-the-token")
                await browser.click("#login")
                assert "Wrong token" in await browser.text("#error")
                await browser.type("#token", TOKEN)
                await browser.click("#login")
                await browser.find("#live")  # logged in: the page itself, not the form
                await browser.get(base + "/?sort=activity")  # rooms by their last guess
                row = f'tr[data-room="{room}"]'
                assert f"room {hold}" in await browser.text(row)
                assert rnd_h.secret not in await browser.page()

                await browser.click(f"{row} button.pause")

                async def paused() -> bool:
                    return await stack.lanes.is_paused(room)

                await eventually(paused, timeout=10, what="the room paused")
                await browser.get(base + "/?sort=activity")
                assert "paused" in await browser.text(row)

                # the paused room's guesses wait; the other room's are scored
                g1 = "".join(wrong_guess(rnd_h.secret_emojis, ann_h.palette, 1))
                g2 = "".join(wrong_guess(rnd_o.secret_emojis, ann_o.palette, 1))
                stack.standin.send_text(hold, BOB, g1)
                mid = stack.standin.send_text(other, BOB, g2)
                await stack.result(other, mid, "Bob", g2)
                await asyncio.sleep(1.0)  # an idle pool would have served it long since
                assert await scored_in(stack, rnd_h.id) == 1
                assert await scored_in(stack, rnd_o.id) == 2
                await browser.get(base + "/?sort=pending")
                cells = await browser.text(row)
                assert "paused" in cells and " 1 " in f" {cells} "  # one guess pending
                if os.environ.get("CODEMOJEX_OPS_SCREENSHOT"):
                    await asyncio.sleep(11)  # two samples more for the charts
                    await browser.get(base + "/?sort=pending")
                    await asyncio.sleep(1)
                await browser.screenshot(tmp_path / "ops-page.png")
                if target := os.environ.get("CODEMOJEX_OPS_SCREENSHOT"):
                    shutil.copy(tmp_path / "ops-page.png", target)

                await browser.click(f"{row} button.resume")

                async def scored() -> bool:
                    return await scored_in(stack, rnd_h.id) == 2

                await eventually(scored, timeout=15, what="the resumed room's guess scored")
                assert not await stack.lanes.is_paused(room)
        finally:
            if browser is not None:
                await asyncio.to_thread(browser.quit)
            for ops in publishers:
                await ops.stop()
        audit = await stack.all(
            select(AuditLog).where(AuditLog.room_id == room).order_by(AuditLog.id)
        )
    acts = [(row.action, row.actor_tg_id, "Olga Ops" in row.args) for row in audit]
    assert acts[-2:] == [("pause", None, True), ("resume", None, True)]
