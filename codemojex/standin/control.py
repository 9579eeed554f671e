"""An HTTP face for the stand-in's Python API, for drivers in another process.

`POST /_standin/<action>` with a JSON object of keyword arguments calls the StandIn method of
that name (only the ones listed here) and answers {"ok": true, "result": ...}; `GET` works
for the read-only ones with query arguments. Local testing tool: no authentication.

The server (server.py) adds these routes for itself; this module knows the stand-in only by
the names in `ACTIONS`, so it imports nothing of it.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from aiohttp import web

PREFIX = "/_standin/"

ACTIONS = frozenset(
    {
        "add_user",
        "add_group",
        "set_admins",
        "remove_bot",
        "migrate_to_supergroup",
        "block_bot",
        "add_topic",
        "add_channel",
        "post_in_channel",
        "inline_query",
        "inline_results",
        "choose_inline_result",
        "send_text",
        "send_as_anonymous_admin",
        "send_as_channel",
        "send_private",
        "edit_text",
        "press_button",
        "push_raw_update",
        "inject_429",
        "inject_error",
        "inject_lost_response",
        "inject_latency",
        "clear_faults",
        "enforce_rate_limits",
        "disable_rate_limits",
        "sent_messages",
        "edited_messages",
        "message",
        "message_ts",
        "registered_commands",
        "stats",
    }
)
READ_ONLY = frozenset(
    {
        "sent_messages",
        "edited_messages",
        "message",
        "message_ts",
        "registered_commands",
        "stats",
        "inline_results",
    }
)


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {k: _jsonable(v) for k, v in dataclasses.asdict(value).items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value


def _query_value(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def add_routes(app: web.Application, standin: object) -> None:
    """Route `/_standin/<action>` of `app` to the method `action` of `standin`."""

    def refuse(description: str, status: int = 400) -> web.Response:
        return web.json_response({"ok": False, "description": description}, status=status)

    async def handle(request: web.Request) -> web.Response:
        action = request.match_info["action"]
        if action not in ACTIONS or (request.method == "GET" and action not in READ_ONLY):
            return refuse("unknown action", 404)
        kwargs: dict[str, Any] = {k: _query_value(v) for k, v in request.query.items()}
        if request.can_read_body:
            try:
                body = await request.json()
            except ValueError:
                return refuse("bad JSON")
            if not isinstance(body, dict):
                return refuse("JSON object expected")
            kwargs.update(body)
        try:
            result = getattr(standin, action)(**kwargs)
        except (KeyError, ValueError, TypeError) as exc:
            return refuse(str(exc))
        return web.json_response({"ok": True, "result": _jsonable(result)})

    app.router.add_route("*", PREFIX + "{action}", handle)
