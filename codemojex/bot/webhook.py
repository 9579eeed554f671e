"""The bot's webhook: the HTTP server Telegram POSTs updates to when CODEMOJEX_WEBHOOK_URL is set.

A small aiohttp server of our own instead of python-telegram-bot's tornado server, which
reads a body of up to 100 MB into memory before it looks at the secret header, and answers
200 as soon as the update is queued. Telegram never sends again an update it got a 2xx for,
so here the answer waits for the update's handler (a guess is admitted to the lanes inside
it): a process killed with requests in hand never answered them, and Telegram delivers those
again. Each check comes before the work the next one costs:

1. the path and the method (aiohttp's router: 404, 405);
2. the secret header (`X-Telegram-Bot-Api-Secret-Token`), compared in constant time: 403,
   with the body unread and the connection closed;
3. more than `in_hand` requests in hand: 503 with a Retry-After (below), unread;
4. the declared length over `BOT.webhook_body_max`: 413, unread; a body sent without a length
   is read up to the cap and refused past it (aiohttp's `client_max_size`);
5. JSON into an `Update`: 400 for anything else (Telegram would send it again, to no avail);
6. the update is handled (bot/processor.py `handle_update`: in order per sender, a bounded
   number at once), then 200, also when a handler raised (its error handler ran).

Telegram opens at most setWebhook's `max_connections` to the bot, one update in hand on each,
and the bot tells it `in_hand` (the same bound), so 503 is for what goes past it anyway
(several webhook setups, a proxy that pools differently). Why 503 with Retry-After: Telegram's
Bot API server (tdlib/telegram-bot-api, WebhookActor) treats every non-2xx answer alike,
keeps the update and delivers it again after the Retry-After it was given (up to an hour),
else after a backoff that doubles; it gives up on an update only when the update expires,
and it closes a webhook that keeps answering 410. 503 also tells nginx in front to try the
other bot process (deploy/nginx). Telegram delivers one update of a chat at a time, so the
delayed update holds back its chat's next ones and their order is kept.

Stopping: the listener closes (Telegram's next requests fail and are delivered again), the
requests in hand finish within `stop_s` and are answered; one still running then is
cancelled, unanswered, and comes again.

The secret itself must be strong to start at all (`webhook_config`): 32 to 256 characters of
Telegram's set `A-Z a-z 0-9 _ -`. A reverse proxy in front (TLS, its own body limit) is shown
in deploy/.
"""

from __future__ import annotations

import hmac
import json
import logging
import re
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

from aiohttp import web
from telegram import Update
from telegram.ext import Application

from codemojex.bot.processor import handle_update
from codemojex.limits import BOT, TELEGRAM
from codemojex.settings import Settings

log = logging.getLogger(__name__)

SECRET_HEADER: Final = "X-Telegram-Bot-Api-Secret-Token"
_SECRET_MIN: Final = BOT.webhook_secret_min
_SECRET_MAX: Final = TELEGRAM.webhook_secret_max
_SECRET_RE: Final = re.compile(rf"[A-Za-z0-9_-]{{{_SECRET_MIN},{_SECRET_MAX}}}")
SECRET_RULE: Final = (
    f"CODEMOJEX_WEBHOOK_SECRET must be {_SECRET_MIN} to {_SECRET_MAX} characters "
    "of A-Z a-z 0-9 _ - (e.g. the output of: python3 -c 'import secrets; "
    "print(secrets.token_urlsafe(32))')"
)


class WeakWebhook(ValueError):
    """The webhook settings are missing or too weak to start with; str() says which rule."""


@dataclass(frozen=True, slots=True)
class WebhookConfig:
    url: str  # what Telegram is told to POST to (setWebhook)
    path: str  # the path this server answers on
    secret: str = ""
    listen: str = "127.0.0.1"
    port: int = 8443
    body_max: int = BOT.webhook_body_max

    def __repr__(self) -> str:  # never the secret
        return f"WebhookConfig(url={self.url!r}, listen={self.listen!r}, port={self.port!r})"


def webhook_config(settings: Settings) -> WebhookConfig:
    """The webhook this bot serves; WeakWebhook when there is no URL or no strong secret."""
    if not settings.webhook_url:
        raise WeakWebhook("webhook mode needs CODEMOJEX_WEBHOOK_URL")
    secret = settings.webhook_secret.get_secret_value() if settings.webhook_secret else ""
    if not _SECRET_RE.fullmatch(secret):
        raise WeakWebhook(SECRET_RULE)
    return WebhookConfig(
        url=settings.webhook_url,
        path="/" + urlsplit(settings.webhook_url).path.strip("/"),
        secret=secret,
        listen=settings.webhook_listen,
        port=settings.webhook_port,
    )


class WebhookServer:
    """Serves `config.path` on `config.listen:config.port`; each accepted update is handled
    by `application` before it is answered, at most `in_hand` at once."""

    def __init__(
        self,
        config: WebhookConfig,
        application: Application[Any, Any, Any, Any, Any, Any],
        *,
        in_hand: int = BOT.in_hand_default,
        stop_s: float = BOT.stop_s,
    ) -> None:
        self.config = config
        self.in_hand = in_hand
        self.holding = 0  # requests in hand now
        self.busy = 0  # requests answered 503 (past in_hand)
        self._application = application
        self._bot = application.bot
        self._secret = config.secret.encode()
        app = web.Application(client_max_size=config.body_max)
        app.router.add_post(config.path, self._receive)
        # No access log: one line per update is noise, and the path is all it would say.
        # Handlers are not cancelled when Telegram hangs up: an update being handled is
        # finished (and comes again, taken once all the same).
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=stop_s)

    async def start(self) -> None:
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.config.listen, self.config.port)
        await site.start()
        log.info("webhook listening on %s:%d", self.config.listen, self.config.port)

    async def stop(self) -> None:
        await self._runner.cleanup()

    async def _receive(self, request: web.Request) -> web.StreamResponse:
        given = request.headers.get(SECRET_HEADER, "").encode("utf-8", "replace")
        if not hmac.compare_digest(given, self._secret):
            return _refused(403)
        if self.holding >= self.in_hand:
            self.busy += 1
            response = _refused(503)
            response.headers["Retry-After"] = str(BOT.webhook_busy_retry_after_s)
            return response
        if request.content_length is not None and request.content_length > self.config.body_max:
            return _refused(413)
        self.holding += 1
        try:
            try:
                body = await request.read()
            except web.HTTPRequestEntityTooLarge:
                return _refused(413)
            try:
                data = json.loads(body)
                if not isinstance(data, dict):
                    raise ValueError("not an object")
                update = Update.de_json(data, self._bot)
            except Exception:  # anything that is not an update's JSON
                log.warning("webhook: a request with the right secret was not an update")
                return web.Response(status=400)
            await handle_update(self._application, update)
        finally:
            self.holding -= 1
        return web.Response()


def _refused(status: int) -> web.Response:
    """An answer that leaves the body unread: the connection is closed rather than drained."""
    response = web.Response(status=status)
    response.force_close()
    return response
