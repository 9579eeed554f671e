"""Local stand-in for the Telegram Bot API (tests, demo, reliability harness)."""

from codemojex.standin.server import (
    GROUP_ANONYMOUS_BOT_ID,
    SECRET_HEADER,
    ApiCall,
    EditedMessage,
    RateViolation,
    SentMessage,
    StandIn,
)

__all__ = [
    "GROUP_ANONYMOUS_BOT_ID",
    "SECRET_HEADER",
    "ApiCall",
    "EditedMessage",
    "RateViolation",
    "SentMessage",
    "StandIn",
]
