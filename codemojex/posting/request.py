"""The Bot API's HTTP client: python-telegram-bot's `BaseRequest` over aiohttp, for the
worker's and the sender's posts and the bot's getUpdates (bot/polling.py).

PTB's own `HTTPXRequest` spent about 2 ms of CPU per sendMessage in the sender (httpx and
httpcore's per-request machinery: its timeouts, pool bookkeeping and response model), more than
the rest of a post together; aiohttp, already a dependency (the webhook server), does the same
request for a fraction of it (docs/benchmarks.md, "The sender's CPU per post"); for the
bot's getUpdates, about 430 µs of CPU a call against httpx's 1,000 (a window of 100 updates on
loopback, its JSON decoding included). PTB keeps
everything above the wire: `BaseRequest.post` turns a status and a body into the result or the
error PTB raises for it (RetryAfter from a 429's `retry_after`, BadRequest, Forbidden,
ChatMigrated, ...), so the answers mean the same whichever client carried them.

What this class owes PTB:
- its timeouts, per call or the defaults given here: `pool_timeout` + `connect_timeout` bound
  getting a connection (aiohttp counts the wait for a free one in its `connect`),
  `connect_timeout` the connect itself, `read_timeout` every wait for the answer's bytes,
  and the whole request is bounded by their sum with `write_timeout` (aiohttp has no write
  timeout of its own; a post's body fits in the socket's buffer);
- its errors: a timeout is `TimedOut`, any other failure of the client `NetworkError`, each
  raised from aiohttp's own exception, which says whether the request may have gone out
  (posting/sender/telegram.py `maybe_delivered`; whether it is an outage stays
  codemojex/outages.py's to say, from the PTB type);
- `shutdown` closes the session and its connections (`Bot.shutdown`, `async with bot`).

A POST is never retried by aiohttp (only idempotent methods are, on a dropped kept-alive
connection): a sendMessage goes out once per call.
"""

from __future__ import annotations

import logging
from typing import Final

import aiohttp
from telegram._utils.defaultvalue import DefaultValue
from telegram._utils.types import ODVInput
from telegram.error import NetworkError, TimedOut
from telegram.request import BaseRequest, RequestData

# Every call at INFO, as httpx logs PTB's own (its URL, the token masked by the log formatter:
# secrecy.py; never a body): the CLI shows them with -v only.
log = logging.getLogger(__name__)

# How long an idle connection to the Bot API is kept for the next post.
KEEPALIVE_S: Final = 30.0


def _given(value: ODVInput[float], default: float | None) -> float | None:
    return default if isinstance(value, DefaultValue) else value


def _sum(*parts: float | None) -> float | None:
    """The sum of the bounds, or None (no bound) when any part has none."""
    if any(part is None for part in parts):
        return None
    return sum(part for part in parts if part is not None)


class AiohttpRequest(BaseRequest):
    """PTB's requests through one aiohttp session of `connections` connections at most."""

    def __init__(
        self,
        *,
        connections: int,
        pool_timeout: float | None,
        connect_timeout: float | None,
        read_timeout: float | None,
        write_timeout: float | None,
    ) -> None:
        self._connections = connections
        self._pool_timeout = pool_timeout
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._write_timeout = write_timeout
        self._session: aiohttp.ClientSession | None = None

    @property
    def read_timeout(self) -> float | None:
        return self._read_timeout

    @property
    def closed(self) -> bool:
        """No session open (none yet, or shut down)."""
        return self._session is None or self._session.closed

    def _open(self) -> aiohttp.ClientSession:
        # Made in the running loop, at the first use: PTB may post through a Bot never
        # initialised (the sender's), and a session belongs to the loop it was made in.
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self._connections, keepalive_timeout=KEEPALIVE_S)
            self._session = aiohttp.ClientSession(
                connector=connector, headers={"User-Agent": self.USER_AGENT}
            )
        return self._session

    async def initialize(self) -> None:
        self._open()

    async def shutdown(self) -> None:
        session, self._session = self._session, None
        if session is not None and not session.closed:
            await session.close()

    async def do_request(
        self,
        url: str,
        method: str,
        request_data: RequestData | None = None,
        read_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        write_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        connect_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        pool_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
    ) -> tuple[int, bytes]:
        read = _given(read_timeout, self._read_timeout)
        write = _given(write_timeout, self._write_timeout)
        connect = _given(connect_timeout, self._connect_timeout)
        pool = _given(pool_timeout, self._pool_timeout)
        timeout = aiohttp.ClientTimeout(
            total=_sum(pool, connect, write, read),
            connect=_sum(pool, connect),
            sock_connect=connect,
            sock_read=read,
        )
        data: aiohttp.FormData | dict[str, str] | None = None
        if request_data is not None:
            fields = request_data.json_parameters
            files = request_data.multipart_data
            if files:
                form = aiohttp.FormData(fields)
                for name, (filename, content, mimetype) in files.items():
                    form.add_field(name, content, filename=filename, content_type=mimetype)
                data = form
            else:
                data = fields
        try:
            async with self._open().request(method, url, data=data, timeout=timeout) as res:
                body = await res.read()
        except TimeoutError as exc:  # aiohttp's own timeouts are TimeoutErrors too
            raise TimedOut from exc
        except aiohttp.ClientError as exc:
            raise NetworkError(f"aiohttp.{type(exc).__name__}: {exc}") from exc
        log.info('HTTP Request: %s %s "%d %s"', method, url, res.status, res.reason)
        return res.status, body
