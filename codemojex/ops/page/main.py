"""`codemojex ops`: the operator page as a process of its own (CODEMOJEX_OPS_HOST:OPS_PORT)."""

from __future__ import annotations

import asyncio
import logging
import signal
from typing import TYPE_CHECKING, Final

from aiohttp import web

from codemojex.ops.page.app import OpsPage
from codemojex.ops.page.auth import token_problem
from codemojex.ops.page.history import History
from codemojex.ops.page.proxies import TrustedProxies
from codemojex.posting.keys import bot_id
from codemojex.runtime import open_runtime
from codemojex.values.hosts import is_loopback

if TYPE_CHECKING:  # Settings sits above its readers: they take it, never build it
    from codemojex.settings import Settings

log = logging.getLogger(__name__)
PLAIN_HTTP_OK: Final = "CODEMOJEX_OPS_PLAIN_HTTP_OK"


def plain_http_problem(settings: Settings) -> str | None:
    """Why the page will not listen where it is told (None: it will). It speaks plain http:
    on an address other than loopback, the token and the session cookie would cross the
    network in clear, unless a TLS proxy in front is the only one who talks to it."""
    host = settings.ops_host
    if is_loopback(host) or settings.ops_trusted_proxies or settings.ops_plain_http_ok:
        return None
    where = host or "every address"
    return (
        f"the ops page speaks plain http, and CODEMOJEX_OPS_HOST={where} is reachable from "
        "other machines: the token and the session cookie would cross the network in clear. "
        "Put a TLS proxy in front and list it in CODEMOJEX_OPS_TRUSTED_PROXIES "
        "(deploy/nginx/codemojex-ops.conf), or listen on 127.0.0.1, or set "
        f"{PLAIN_HTTP_OK}=1 if that network is yours alone"
    )


def start_problem(settings: Settings) -> str | None:
    """Why `codemojex ops` will not start with these settings (None: it will); never a
    secret. Checked before anything is connected to."""
    token = settings.ops_token.get_secret_value() if settings.ops_token else None
    return token_problem(token) or plain_http_problem(settings)


async def run_ops(settings: Settings, stop: asyncio.Event | None = None) -> None:
    """Serve the page until SIGTERM/SIGINT (or `stop`), sampling the charts meanwhile.
    ValueError, before anything is started, when CODEMOJEX_OPS_TOKEN is missing or weak or
    the page would speak plain http to other machines (`start_problem`)."""
    token = settings.ops_token.get_secret_value() if settings.ops_token else None
    problem = start_problem(settings)
    if problem is not None or token is None:
        raise ValueError(problem)
    if not is_loopback(settings.ops_host) and not settings.ops_trusted_proxies:
        log.warning(
            "the ops page speaks plain http on %s (%s is set): the token and the session cookie "
            "cross the network in clear",
            settings.ops_host or "every address",
            PLAIN_HTTP_OK,
        )
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        async with open_runtime(settings) as rt:
            token_value = settings.token.get_secret_value() if settings.token else None
            history = History(
                rt.lanes, rt.sessionmaker, rt.redis, settings.queue, bot=bot_id(token_value)
            )
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
