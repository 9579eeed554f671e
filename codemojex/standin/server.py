"""A local stand-in for the Telegram Bot API, spoken to by the real python-telegram-bot.

It runs an aiohttp server on 127.0.0.1 that answers `/bot<token>/<method>` the way Telegram
does (same envelope, same status codes, same error wording for the cases the bot meets), and a
Python API through which tests and the demo play users and groups, inject 429 storms and read
back what the bot posted. Everything lives on the one event loop that runs the server: the
simulation methods are plain functions and are called from that loop.

StandIn is put together from one mixin per Bot API area, each in its own module:
updates (queue, getUpdates, webhook), chats (users, groups, members), messages (typed and
posted), keyboards (inline keyboards, callback queries), inline (inline queries, channels),
commands, limits (faults and flood limits). This module holds what is left: the HTTP
server, the method table, request parsing and the application of injected faults.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, Self

from aiohttp import web

from codemojex.standin import control
from codemojex.standin.commands import Commands
from codemojex.standin.inline import Inline
from codemojex.standin.keyboards import Keyboards
from codemojex.standin.model import ApiCall, ApiError, Params, User, bad, safe_int

log = logging.getLogger("codemojex.standin")

_TOKEN_RE = re.compile(r"\d+:[A-Za-z0-9_-]+")


class StandIn(Inline, Keyboards, Commands):
    """The Bot API stand-in. See the module docstring; one instance = one bot token.

    ```python
    standin = StandIn()
    await standin.start()
    app = ApplicationBuilder().token(standin.token).base_url(standin.base_url)
                              .base_file_url(standin.base_file_url).build()
    ```
    """

    def __init__(
        self,
        token: str = "123:TEST",
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        bot_username: str = "codemojex_bot",
        bot_name: str = "Codemojex",
        privacy_mode: bool = False,
        inline_mode: bool = False,
    ) -> None:
        if not _TOKEN_RE.fullmatch(token):
            raise ValueError("token must look like '<digits>:<letters>'")
        self.token = token
        self.host = host
        self.port = port
        self.privacy_mode = privacy_mode
        self.inline_mode = inline_mode
        self.bot = User(int(token.split(":", 1)[0]), bot_name, bot_username, is_bot=True)
        super().__init__()  # each area sets up its own state

        self.calls: Counter[str] = Counter()
        self.call_log: deque[ApiCall] = deque(maxlen=20_000)
        self._runner: web.AppRunner | None = None
        self._handlers: dict[str, Callable[[Params], Awaitable[Any]]] = {
            "getMe": self._get_me,
            "getUpdates": self._get_updates,
            "sendMessage": self._send_message,
            "editMessageText": self._edit_message_text,
            "editMessageReplyMarkup": self._edit_message_reply_markup,
            "answerCallbackQuery": self._answer_callback_query,
            "answerInlineQuery": self._answer_inline_query,
            "deleteMessage": self._delete_message,
            "getChat": self._get_chat,
            "getChatAdministrators": self._get_chat_administrators,
            "getChatMember": self._get_chat_member,
            "getChatMemberCount": self._get_chat_member_count,
            "setMyCommands": self._set_my_commands,
            "getMyCommands": self._get_my_commands,
            "deleteMyCommands": self._delete_my_commands,
            "setWebhook": self._set_webhook,
            "deleteWebhook": self._delete_webhook,
            "getWebhookInfo": self._get_webhook_info,
            "leaveChat": self._leave_chat,
            "createForumTopic": self._create_forum_topic,
        }
        for harmless in (
            "sendChatAction",
            "close",
            "logOut",
            "setMyName",
            "setMyDescription",
            "setMyShortDescription",
            "setChatMenuButton",
            "setMyDefaultAdministratorRights",
        ):
            self._handlers[harmless] = self._harmless
        self._canonical = {name.lower(): name for name in self._handlers}

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> str:
        """Listen on host:port (port 0 = a free one) and return `base_url`."""
        app = web.Application(client_max_size=8 * 1024 * 1024)
        app.router.add_route("*", "/bot{token}/{method}", self._handle)
        control.add_routes(app, self)
        app.router.add_route("*", "/{tail:.*}", self._not_found)
        # Cancel a long poll whose client went away, so it does not linger until its timeout.
        self._runner = web.AppRunner(
            app, handler_cancellation=True, shutdown_timeout=1.0, access_log=None
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self.port = int(self._runner.addresses[0][1])
        self._open_updates()
        return self.base_url

    async def stop(self) -> None:
        await self._close_updates()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """For `ApplicationBuilder().base_url(...)`: PTB appends the token and the method."""
        return f"{self.url}/bot"

    @property
    def base_file_url(self) -> str:
        return f"{self.url}/file/bot"

    def stats(self) -> dict[str, Any]:
        """Counters for summaries (the demo, the reliability harness)."""
        return {
            "calls": dict(self.calls),
            "sent_messages": len(self._sent),
            "edits": len(self._edits),
            "injected_errors": self.injected_errors,
            "rate_violations": len(self.violations),
            "pending_updates": self.pending_updates,
        }

    # ------------------------------------------------------------------ HTTP

    async def _not_found(self, request: web.Request) -> web.Response:
        return web.json_response(
            {"ok": False, "error_code": 404, "description": "Not Found"}, status=404
        )

    async def _read_params(self, request: web.Request) -> Params:
        raw: dict[str, Any] = dict(request.query)
        if request.can_read_body:
            if request.content_type == "application/json":
                try:
                    body = await request.json()
                except ValueError:
                    raise bad("can't parse JSON object") from None
                if not isinstance(body, dict):
                    raise bad("JSON object expected")
                raw.update(body)
            else:
                form = await request.post()
                for key, value in form.items():
                    raw[key] = value if isinstance(value, str) else "<file>"
        return Params(raw)

    async def _handle(self, request: web.Request) -> web.Response:
        token = request.match_info["token"]
        method = request.match_info["method"]
        if not _TOKEN_RE.fullmatch(token):
            return await self._not_found(request)
        if token != self.token:
            return web.json_response(
                {"ok": False, "error_code": 401, "description": "Unauthorized"}, status=401
            )
        canonical = self._canonical.get(method.lower())
        if canonical is None:
            return await self._not_found(request)
        self.calls[canonical] += 1
        params = Params({})
        try:
            params = await self._read_params(request)
            fault = self._take_fault(canonical, safe_int(params.raw.get("chat_id")))
            if fault is not None and fault.kind == "error":
                raise ApiError(fault.status, fault.description, retry_after=fault.retry_after)
            if fault is not None and fault.kind == "delay":
                # Shielded: like Telegram, the call is carried out even if the client gives up.
                work = asyncio.ensure_future(self._delayed(fault.delay_s, canonical, params))
                work.add_done_callback(_retrieve)
                result = await asyncio.shield(work)
            else:
                result = await self._handlers[canonical](params)
            if fault is not None and fault.kind == "lost_response":
                self.call_log.append(ApiCall(time.monotonic(), canonical, params.raw, 0))
                if request.transport is not None:
                    request.transport.close()
                return web.Response(status=500)  # never reaches the client
        except ApiError as error:
            # INFO, not WARNING: refusals are often the point of a test (429 storms, bad input).
            log.info("%s -> %s %s", canonical, error.code, error.description)
            self.call_log.append(ApiCall(time.monotonic(), canonical, params.raw, error.code))
            return web.json_response(error.envelope(), status=error.code)
        except (TypeError, ValueError, KeyError, AttributeError):
            # Parameters of a shape nobody checked: a stand-in bug, but answered like Telegram's
            # own internal errors rather than as a dropped connection.
            log.exception("%s failed on %r", canonical, params.raw)
            self.call_log.append(ApiCall(time.monotonic(), canonical, params.raw, 500))
            return web.json_response(
                {"ok": False, "error_code": 500, "description": "Internal Server Error"},
                status=500,
            )
        self.call_log.append(ApiCall(time.monotonic(), canonical, params.raw, 200))
        return web.json_response({"ok": True, "result": result})

    async def _delayed(self, delay_s: float, method: str, params: Params) -> Any:
        await asyncio.sleep(delay_s)
        return await self._handlers[method](params)

    # ------------------------------------------------------------------ Bot API methods

    async def _harmless(self, params: Params) -> Any:
        return True

    async def _get_me(self, params: Params) -> Any:
        return {
            **self.bot.to_dict(),
            "can_join_groups": True,
            "can_read_all_group_messages": not self.privacy_mode,
            "supports_inline_queries": self.inline_mode,
            "can_connect_to_business": False,
            "has_main_web_app": False,
        }


def _retrieve(task: asyncio.Future[Any]) -> None:
    # The client may be gone; its refusal is then nobody's to read.
    if not task.cancelled():
        task.exception()
