"""The bot's command menu: setMyCommands / getMyCommands / deleteMyCommands, per scope.

Telegram keeps one list per (scope, language_code) and checks each command's name and
description, and that a language code is a two-letter ISO 639-1 one ("pt", never "pt-br");
the stand-in does the same so tests can read back what the bot registered.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from codemojex.standin.model import JSON, Params, bad

_COMMAND_NAME_RE = re.compile(r"[a-z0-9_]{1,32}")
_LANGUAGE_CODE_RE = re.compile(r"[a-z]{2}")


def _scope_key(scope: Any) -> str:
    if not scope:
        return "default"
    return json.dumps(scope, sort_keys=True)


def _key(params: Params) -> tuple[str, str]:
    language = params.get_str("language_code") or ""
    if language and not _LANGUAGE_CODE_RE.fullmatch(language):
        raise bad("invalid language code specified")
    return _scope_key(params.get_json("scope")), language


class Commands:
    """StandIn's command menus (a mixin: StandIn inherits every area)."""

    def __init__(self) -> None:
        super().__init__()
        self.commands: dict[tuple[str, str], list[JSON]] = {}

    def registered_commands(
        self, scope: Mapping[str, Any] | None = None, language_code: str = ""
    ) -> list[JSON]:
        return list(self.commands.get((_scope_key(scope), language_code), []))

    # ------------------------------------------------------------------ Bot API methods

    async def _set_my_commands(self, params: Params) -> Any:
        commands = params.get_json("commands")
        if not isinstance(commands, list):
            raise bad("commands must be an array")
        if len(commands) > 100:
            raise bad("too many commands")
        clean: list[JSON] = []
        for entry in commands:
            if not isinstance(entry, dict):
                raise bad("can't parse BotCommand")
            name = str(entry.get("command", "")).removeprefix("/")
            description = str(entry.get("description", ""))
            if not _COMMAND_NAME_RE.fullmatch(name):
                raise bad("BOT_COMMAND_INVALID")
            if not 1 <= len(description) <= 256:
                raise bad("BOT_COMMAND_DESCRIPTION_INVALID")
            clean.append({"command": name, "description": description})
        self.commands[_key(params)] = clean
        return True

    async def _get_my_commands(self, params: Params) -> Any:
        return self.commands.get(_key(params), [])

    async def _delete_my_commands(self, params: Params) -> Any:
        self.commands.pop(_key(params), None)
        return True
