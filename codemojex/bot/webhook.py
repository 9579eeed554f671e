"""The bot's webhook: the HTTP server Telegram POSTs updates to when CODEMOJEX_WEBHOOK_URL is set.

A small aiohttp server of our own instead of python-telegram-bot's tornado server, which
reads a body of up to 100 MB into memory before it looks at the secret header, and answers
200 as soon as the update is queued. Telegram never sends again an update it got a 2xx for,
so here the answer waits until the door settled the update (bot/door.py: finished, parked
in Redis past its deadline, or a dead letter): a process killed with requests in hand never
answered them, and Telegram delivers those again. Each check comes before the work the next
one costs:

1. the path and the method (aiohttp's router: 404, 405);
2. the secret header (`X-Telegram-Bot-Api-Secret-Token`), compared in constant time: 403,
   with the body unread and the connection closed;
3. more than `in_hand` requests unsettled, or the door holding its `held_max` updates: 503 with a
   Retry-After (below), unread;
4. the declared length over `BODY_MAX`: 413, unread; a body sent without a length
   is read up to the cap and refused past it (aiohttp's `client_max_size`);
5. a body python-telegram-bot cannot read as an `Update` (not JSON, not an update, an update
   of a shape it does not know): a dead letter, then 200 (it would never be read, and Telegram
   would deliver it again for a day, holding its chat);
6. the update is handed to the door, and answered once settled: 200; 503 with a Retry-After
   when it was given back (not finished by its deadline while Redis could not keep it: an
   outage is backpressure, Telegram keeps the update and sends it again).

Telegram opens at most setWebhook's `max_connections` to the bot, one update in hand on each,
and the bot tells it `in_hand` (the same bound), so 503 is for what goes past it anyway
(several webhook setups, a proxy that pools differently). Why 503 with Retry-After: Telegram's
Bot API server (tdlib/telegram-bot-api, WebhookActor) treats every non-2xx answer alike,
keeps the update and delivers it again after the Retry-After it was given (up to an hour),
else after a backoff that doubles; it gives up on an update only when the update expires,
and it closes a webhook that keeps answering 410. 503 also tells nginx in front to try the
other bot process (deploy/nginx). Telegram delivers one update of a chat at a time, so the
delayed update holds back its chat's next ones and their order is kept; a parked one no
longer does (it is answered), and its chat's next updates wait behind it in this process.

Every bot process in webhook mode runs the door's clock: parking, and taking over the parked
updates of a bot process that died.

Stopping: the listener closes (Telegram's next requests fail and are delivered again), the
requests in hand are settled within `stop_s` and answered; one still running then is
cancelled, unanswered, and comes again.

The secret itself must be strong to start at all (`webhook_config`): 32 to 256 characters of
Telegram's set `A-Z a-z 0-9 _ -`. A reverse proxy in front (TLS, its own body limit) is shown
in deploy/.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import re
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from aiohttp import web
from pydantic import SecretStr
from telegram import Update

from codemojex.bot.door import IN_HAND, STOP_S, Door, InHand
from codemojex.limits import TELEGRAM
from codemojex.values.bounds import within

log = logging.getLogger(__name__)

SECRET_HEADER: Final = "X-Telegram-Bot-Api-Secret-Token"
# The shortest secret we start with: a guessable one lets anyone inject updates.
SECRET_MIN: Final = 32
_SECRET_MAX: Final = TELEGRAM.webhook_secret_max
_SECRET_RE: Final = re.compile(rf"[A-Za-z0-9_-]{{{SECRET_MIN},{_SECRET_MAX}}}")
SECRET_RULE: Final = (
    f"CODEMOJEX_WEBHOOK_SECRET must be {SECRET_MIN} to {_SECRET_MAX} characters "
    "of A-Z a-z 0-9 _ - (e.g. the output of: python3 -c 'import secrets; "
    "print(secrets.token_urlsafe(32))')"
)
# Bodies over this are refused unread: an update is a few kB.
BODY_MAX: Final = 2 * 1024 * 1024
# A request past the updates in hand gets 503 with this Retry-After (Telegram waits so long).
BUSY_RETRY_AFTER_S: Final = 1


class WeakWebhook(ValueError):
    """The webhook settings are missing or too weak to start with; str() says which rule."""


@dataclass(frozen=True, slots=True)
class WebhookConfig:
    url: str  # what Telegram is told to POST to (setWebhook)
    path: str  # the path this server answers on
    secret: str = ""
    listen: str = "127.0.0.1"
    port: int = 8443
    body_max: int = BODY_MAX

    def __repr__(self) -> str:  # never the secret
        return f"WebhookConfig(url={self.url!r}, listen={self.listen!r}, port={self.port!r})"


def webhook_config(
    url: str | None, secret: SecretStr | None, *, listen: str, port: int
) -> WebhookConfig:
    """The webhook this bot serves at `url`, answering on `listen`:`port`
    (CODEMOJEX_WEBHOOK_*); WeakWebhook when there is no URL or no strong secret."""
    if not url:
        raise WeakWebhook("webhook mode needs CODEMOJEX_WEBHOOK_URL")
    shown = secret.get_secret_value() if secret else ""
    if not _SECRET_RE.fullmatch(shown):
        raise WeakWebhook(SECRET_RULE)
    return WebhookConfig(
        url=url,
        path="/" + urlsplit(url).path.strip("/"),
        secret=shown,
        listen=listen,
        port=port,
    )


class WebhookServer:
    """Serves `config.path` on `config.listen:config.port`; each accepted update is handed to
    `door` and answered once settled, at most `in_hand` unsettled at once."""

    def __init__(
        self,
        config: WebhookConfig,
        door: Door,
        *,
        in_hand: int = IN_HAND,
        stop_s: float = STOP_S,
    ) -> None:
        self.config = config
        self.door = door
        self.in_hand = within(in_hand, InHand, "in_hand")
        self.busy = 0  # requests answered 503 (past in_hand, or given back)
        self._stop_s = stop_s
        self._secret = config.secret.encode()
        self._running = False
        app = web.Application(client_max_size=config.body_max)
        app.router.add_post(config.path, self._receive)
        # No access log: one line per update is noise, and the path is all it would say.
        # Handlers are not cancelled when Telegram hangs up: an update being handled is
        # finished (and comes again, taken once all the same).
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=stop_s)

    @property
    def holding(self) -> int:
        """Updates taken and not settled: the requests waiting for their answer."""
        return self.door.unsettled

    async def start(self) -> None:
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.config.listen, self.config.port)
        await site.start()
        self.door.run(lambda: True)
        self._running = True
        log.info("webhook listening on %s:%d", self.config.listen, self.config.port)

    async def stop(self) -> None:
        await self._runner.cleanup()
        if self._running:
            self._running = False
            await self.door.stop(self._stop_s)

    async def _receive(self, request: web.Request) -> web.StreamResponse:
        given = request.headers.get(SECRET_HEADER, "").encode("utf-8", "replace")
        if not hmac.compare_digest(given, self._secret):
            return _refused(403)
        if self.door.unsettled >= self.in_hand or self.door.held >= self.door.held_max:
            return self._busy()
        if request.content_length is not None and request.content_length > self.config.body_max:
            return _refused(413)
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return _refused(413)
        try:
            data = json.loads(body)
        except ValueError:
            data = None
        update_id = data.get("update_id") if isinstance(data, dict) else None
        try:
            if not isinstance(update_id, int):
                raise ValueError("not an update")
            update = Update.de_json(data, self.door.bot)
        except Exception as exc:  # nothing PTB can read: a dead letter, never again
            # From someone who knows the secret, so Telegram (or a proxy in between): a 4xx
            # would have it sent again for a day, holding its chat. Id 0: it has none.
            kept = self.door.unreadable(update_id if isinstance(update_id, int) else 0, body, exc)
            try:
                await asyncio.wait_for(asyncio.shield(kept), self._stop_s)
            except TimeoutError:  # Redis cannot keep it now: Telegram sends it again
                kept.cancel()
                return self._busy()
            return web.Response()
        ticket = self.door.take(update, body)
        if await asyncio.shield(ticket.settled) == "given_back":
            return self._busy()
        return web.Response()

    def _busy(self) -> web.Response:
        self.busy += 1
        response = _refused(503)
        response.headers["Retry-After"] = str(BUSY_RETRY_AFTER_S)
        return response


def _refused(status: int) -> web.Response:
    """An answer that leaves the body unread: the connection is closed rather than drained."""
    response = web.Response(status=status)
    response.force_close()
    return response
