"""Codemojex: an emoji code-breaking game for Telegram groups, on fair Redis lanes."""

__version__ = "0.1.0"
