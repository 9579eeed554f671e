"""The Telegram bot: validates guesses and enqueues them into the player's lane."""

from codemojex.bot.app import BotParts, Front, build_application, running
from codemojex.bot.context import BotServices, CodemojexApp, CodemojexContext

__all__ = [
    "BotParts",
    "BotServices",
    "CodemojexApp",
    "CodemojexContext",
    "Front",
    "build_application",
    "running",
]
