"""`codemojex ops`: the operator page as a process of its own (CODEMOJEX_OPS_HOST:OPS_PORT)."""

from __future__ import annotations

import asyncio
import logging
import signal

from aiohttp import web

from codemojex.ops.page.app import OpsPage
from codemojex.ops.page.auth import token_problem
from codemojex.ops.page.history import History
from codemojex.ops.page.proxies import TrustedProxies
from codemojex.runtime import open_runtime
from codemojex.settings import Settings

log = logging.getLogger(__name__)


async def run_ops(settings: Settings, stop: asyncio.Event | None = None) -> None:
    """Serve the page until SIGTERM/SIGINT (or `stop`), sampling the charts meanwhile.
    ValueError, before anything is started, when CODEMOJEX_OPS_TOKEN is missing or weak."""
    token = settings.ops_token.get_secret_value() if settings.ops_token else None
    problem = token_problem(token)
    if problem is not None or token is None:
        raise ValueError(problem)
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        async with open_runtime(settings) as rt:
            history = History(rt.lanes, rt.sessionmaker, rt.redis, settings.queue)
            page = OpsPage(
                rt.lanes,
                rt.sessionmaker,
                history,
                token,
                proxies=TrustedProxies(settings.ops_trusted_proxies),
            )
            runner = web.AppRunner(page.app(), access_log=None)
            await runner.setup()
            await web.TCPSite(runner, settings.ops_host, settings.ops_port).start()
            log.info("ops page on http://%s:%d/", settings.ops_host, settings.ops_port)
            sampler = asyncio.create_task(history.run(stop), name="ops:history")
            try:
                await stop.wait()
            finally:
                sampler.cancel()
                await asyncio.gather(sampler, return_exceptions=True)
                await runner.cleanup()
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
