"""`codemojex ops`: the operator page as a process of its own (CODEMOJEX_OPS_HOST:OPS_PORT)."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Sequence
from dataclasses import dataclass
from ipaddress import IPv4Network, IPv6Network
from typing import Final

from aiohttp import web
from pydantic import SecretStr

from codemojex.ops.health import readiness
from codemojex.ops.page.app import OpsPage
from codemojex.ops.page.auth import token_problem
from codemojex.ops.page.history import History
from codemojex.ops.page.proxies import TrustedProxies
from codemojex.ops.startup import Probes
from codemojex.runtime import RuntimeConfig, open_runtime
from codemojex.values.hosts import is_loopback

log = logging.getLogger(__name__)
PLAIN_HTTP_OK: Final = "CODEMOJEX_OPS_PLAIN_HTTP_OK"


@dataclass(frozen=True, slots=True, kw_only=True)
class OpsPageConfig:
    """Where the page listens (`host`:`port`), who may log in (`token`; None: nobody, and the
    page refuses to start), the TLS proxies in front whose forwarded headers are believed,
    and whether the operator accepts plain http off loopback without one (`plain_http_ok`):
    CODEMOJEX_OPS_*."""

    host: str
    port: int
    token: SecretStr | None
    trusted_proxies: Sequence[IPv4Network | IPv6Network]
    plain_http_ok: bool
    # The bot whose learned pace the page shows (posting/keys.py bot_id of its token).
    bot: int = 0


def plain_http_problem(config: OpsPageConfig) -> str | None:
    """Why the page will not listen where it is told (None: it will). It speaks plain http:
    on an address other than loopback, the token and the session cookie would cross the
    network in clear, unless a TLS proxy in front is the only one who talks to it."""
    host = config.host
    if is_loopback(host) or config.trusted_proxies or config.plain_http_ok:
        return None
    where = host or "every address"
    return (
        f"the ops page speaks plain http, and CODEMOJEX_OPS_HOST={where} is reachable from "
        "other machines: the token and the session cookie would cross the network in clear. "
        "Put a TLS proxy in front and list it in CODEMOJEX_OPS_TRUSTED_PROXIES "
        "(deploy/nginx/codemojex-ops.conf), or listen on 127.0.0.1, or set "
        f"{PLAIN_HTTP_OK}=1 if that network is yours alone"
    )


def start_problem(config: OpsPageConfig) -> str | None:
    """Why `codemojex ops` will not start with these settings (None: it will); never a
    secret. Checked before anything is connected to."""
    token = config.token.get_secret_value() if config.token else None
    return token_problem(token) or plain_http_problem(config)


async def run_ops(
    config: OpsPageConfig,
    runtime: RuntimeConfig,
    stop: asyncio.Event | None = None,
    probes: Probes | None = None,
) -> None:
    """Serve the page until SIGTERM/SIGINT (or `stop`), sampling the charts meanwhile; the
    start-up's `probes` (ops/startup.py) answer /readyz for its Redis and Postgres then.
    ValueError, before anything is started, when CODEMOJEX_OPS_TOKEN is missing or weak or
    the page would speak plain http to other machines (`start_problem`)."""
    token = config.token.get_secret_value() if config.token else None
    problem = start_problem(config)
    if problem is not None or token is None:
        raise ValueError(problem)
    if not is_loopback(config.host) and not config.trusted_proxies:
        log.warning(
            "the ops page speaks plain http on %s (%s is set): the token and the session cookie "
            "cross the network in clear",
            config.host or "every address",
            PLAIN_HTTP_OK,
        )
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        async with open_runtime(runtime) as rt:
            history = History(rt.lanes, rt.sessionmaker, rt.redis, runtime.queue, bot=config.bot)
            page = OpsPage(
                rt.lanes,
                rt.sessionmaker,
                history,
                token,
                proxies=TrustedProxies(config.trusted_proxies),
            )
            runner = web.AppRunner(page.app(), access_log=None)
            await runner.setup()
            await web.TCPSite(runner, config.host, config.port).start()
            log.info("ops page on http://%s:%d/", config.host, config.port)
            if probes is not None:
                redis, engine = rt.redis, rt.engine
                probes.serve(lambda: readiness(redis, engine))
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
