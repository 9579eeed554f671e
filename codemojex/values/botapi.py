"""Where the bot talks to Telegram: the Bot API's address and the bot's token, which the bot
(`bot/app.py`) and the worker's sender (`worker/botapi.py`) are both built with."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import SecretStr


@dataclass(frozen=True, slots=True)
class BotApi:
    """The bot's token (None: not given, which the bot and the worker refuse) and the Bot
    API's base URLs (CODEMOJEX_BOT_API_BASE_URL, _BASE_FILE_URL). Shown, the token is masked
    (`SecretStr`)."""

    token: SecretStr | None
    base_url: str
    base_file_url: str
