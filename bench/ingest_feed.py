"""The Bot API of bench.ingest: pre-built updates handed out as fast as the bot asks.

A minimal Bot API on loopback, in the benchmark's own process: getUpdates answers at once
with the next (up to `limit`) updates, each serialised once before the clock starts, so that
the bot, not the API, is what the benchmark measures; sendMessage and the other methods the
bot and the worker's sender call answer a plausible result. It notes when each update was
first handed out (wall clock, ms), which the benchmark compares with the job's `enqueued_ms`
(Redis TIME) for the latency from fetch to enqueue.

Nothing here is Telegram's behaviour beyond what the bot needs to run: for that, the
stand-in (codemojex.standin) is the reference.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from collections import Counter, deque
from typing import Any

from aiohttp import web

BOT_ID = 424_242
TOKEN = f"{BOT_ID}:BENCHINGEST"
_ME = {
    "id": BOT_ID,
    "is_bot": True,
    "first_name": "Bench",
    "username": "bench_ingest_bot",
    "can_join_groups": True,
    "can_read_all_group_messages": True,
    "supports_inline_queries": False,
}


def message_update(
    update_id: int, chat_id: int, title: str, user_id: int, message_id: int, text: str
) -> dict[str, Any]:
    """A supergroup text message as Telegram sends it (a /command with its entity)."""
    message: dict[str, Any] = {
        "message_id": message_id,
        "date": int(time.time()),
        "chat": {"id": chat_id, "type": "supergroup", "title": title},
        "from": {"id": user_id, "is_bot": False, "first_name": f"P{user_id}"},
        "text": text,
    }
    if text.startswith("/"):
        word = text.split(maxsplit=1)[0]
        message["entities"] = [{"type": "bot_command", "offset": 0, "length": len(word)}]
    return {"update_id": update_id, "message": message}


def private_update(update_id: int, user_id: int, message_id: int, text: str) -> dict[str, Any]:
    """A text message in a user's private chat with the bot (the chat id is the user's)."""
    user = {"id": user_id, "is_bot": False, "first_name": f"P{user_id}", "language_code": "en"}
    message: dict[str, Any] = {
        "message_id": message_id,
        "date": int(time.time()),
        "chat": {"id": user_id, "type": "private", "first_name": f"P{user_id}"},
        "from": user,
        "text": text,
    }
    if text.startswith("/"):
        word = text.split(maxsplit=1)[0]
        message["entities"] = [{"type": "bot_command", "offset": 0, "length": len(word)}]
    return {"update_id": update_id, "message": message}


class Feed:
    """The fake Bot API: `add` queues updates; getUpdates hands them out in order."""

    def __init__(self) -> None:
        self._pending: deque[tuple[int, bytes]] = deque()
        self._arrived = asyncio.Event()
        self.served_ms: dict[int, int] = {}  # update id -> when first handed out
        self.calls: Counter[str] = Counter()
        self._message_ids = itertools.count(10_000_000)
        self._runner: web.AppRunner | None = None
        self.port = 0
        self.polls = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/bot"

    @property
    def base_file_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/file/bot"

    def add(self, updates: list[dict[str, Any]]) -> dict[int, int]:
        """Queue updates; each is serialised now, never while the bot waits for it. Their
        message ids stay ours (nothing to map: {})."""
        for update in updates:
            self._pending.append((int(update["update_id"]), json.dumps(update).encode()))
        self._arrived.set()
        return {}

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/bot{token}/{method}", self._handle)
        app.router.add_get("/bot{token}/{method}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = int(self._runner.addresses[0][1])

    async def stop(self) -> None:
        self._arrived.set()
        if self._runner is not None:
            await self._runner.cleanup()

    async def _params(self, request: web.Request) -> dict[str, Any]:
        params: dict[str, Any] = dict(request.query)
        if request.can_read_body:
            if request.content_type == "application/json":
                params.update(await request.json())
            else:
                params.update(await request.post())
        return params

    async def _handle(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        self.calls[method] += 1
        params = await self._params(request)
        if method == "getUpdates":
            return await self._get_updates(params)
        if method == "getMe":
            return _ok(_ME)
        if method in ("sendMessage", "editMessageText"):
            return _ok(
                {
                    "message_id": next(self._message_ids),
                    "date": int(time.time()),
                    "chat": {"id": int(params.get("chat_id", 0)), "type": "supergroup"},
                    "text": str(params.get("text", "")),
                }
            )
        if method == "getChatAdministrators":
            return _ok([])
        return _ok(True)

    async def _get_updates(self, params: dict[str, Any]) -> web.Response:
        offset = int(params.get("offset") or 0)
        limit = min(100, int(params.get("limit") or 100))
        timeout = float(params.get("timeout") or 0)
        self.polls += 1
        while self._pending and self._pending[0][0] < offset:
            self._pending.popleft()  # confirmed by the offset
        if not self._pending and timeout > 0:
            self._arrived.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), timeout)
        chunk = list(itertools.islice(self._pending, limit))
        now_ms = int(time.time() * 1000)
        for update_id, _ in chunk:
            self.served_ms.setdefault(update_id, now_ms)
        body = b'{"ok":true,"result":[' + b",".join(raw for _, raw in chunk) + b"]}"
        return web.Response(body=body, content_type="application/json")


def _ok(result: Any) -> web.Response:
    return web.json_response({"ok": True, "result": result})


class StandInFeed:
    """The Bot API stand-in (codemojex.standin) in `Feed`'s place (`bench.ingest --api
    standin`): the front door as its review measured it. It confirms and returns updates as
    Telegram does (getUpdates returns the unconfirmed ones again), builds each update's JSON
    when it is served, and keeps every message the bot and the worker post, all in the
    benchmark's process, on the same two cores. Each update is typed with `send_text` as a player
    would; its served time is when it was typed (the bot's long poll takes it at once)."""

    def __init__(self) -> None:
        from codemojex.standin import StandIn

        self.standin = StandIn(token=TOKEN, bot_username="bench_ingest_bot")
        self.served_ms: dict[int, int] = {}  # the stand-in's message id -> when typed
        self._chats: set[int] = set()
        # Updates getUpdates returned, those returned again included: what the stand-in
        # serialised (counted around its handler: the stand-in keeps no such count).
        self.updates_served = 0
        serve = self.standin._handlers["getUpdates"]

        async def counted(params: Any) -> Any:
            result = await serve(params)
            self.updates_served += len(result)
            return result

        self.standin._handlers["getUpdates"] = counted

    @property
    def base_url(self) -> str:
        return self.standin.base_url

    @property
    def base_file_url(self) -> str:
        return self.standin.base_file_url

    @property
    def calls(self) -> Counter[str]:
        return Counter(self.standin.stats()["calls"])

    async def start(self) -> None:
        await self.standin.start()

    async def stop(self) -> None:
        await self.standin.stop()

    def add(self, updates: list[dict[str, Any]]) -> dict[int, int]:
        """Type each update's message; our message id -> the stand-in's."""
        ids: dict[int, int] = {}
        for update in updates:
            message = update["message"]
            chat, user = message["chat"], message["from"]
            if user["id"] not in self.standin.users:
                self.standin.add_user(user["id"], user["first_name"])
            if chat["id"] not in self._chats:
                self._chats.add(chat["id"])
                self.standin.add_group(chat["id"], chat["title"])
            typed = self.standin.send_text(chat["id"], user["id"], message["text"])
            self.served_ms[typed] = int(time.time() * 1000)
            ids[message["message_id"]] = typed
        return ids
