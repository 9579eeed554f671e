"""Local stand-in for the Telegram Bot API (tests, demo, reliability harness)."""

from codemojex.standin.limits import RateViolation
from codemojex.standin.model import (
    CHANNEL_BOT_ID,
    GROUP_ANONYMOUS_BOT_ID,
    SECRET_HEADER,
    ApiCall,
    EditedMessage,
    SentMessage,
)
from codemojex.standin.server import StandIn

__all__ = [
    "CHANNEL_BOT_ID",
    "GROUP_ANONYMOUS_BOT_ID",
    "SECRET_HEADER",
    "ApiCall",
    "EditedMessage",
    "RateViolation",
    "SentMessage",
    "StandIn",
]
