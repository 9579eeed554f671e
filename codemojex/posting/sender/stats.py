"""What a sender counts (the demo summary, the metrics endpoint: ops/collect.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class SenderStats:
    """Counters for the demo summary and the metrics endpoint."""

    messages: int = 0  # messages Telegram accepted
    rows_sent: int = 0  # outbox rows those messages carried
    coalesced_messages: int = 0  # messages that carried more than one row
    coalesced_rows: int = 0  # rows that went out inside such a message
    replies: int = 0  # messages posted as a reply to the guess (quiet room)
    retry_after: int = 0  # 429 answers honoured
    failed_rows: int = 0  # rows Telegram refused for good
    recovered_rows: int = 0  # rows found already posted (marker) and only marked
    recovered_ambiguous: int = 0  # rows a dead sender was posting when it died (intent only)
    errors: int = 0  # transient failures (network, database) waited out
    ambiguous: int = 0  # posts that failed in a way that leaves delivery unknown
    turns_outlived: int = 0  # turns that outlived their chat lease (the ring gave it on)

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)
