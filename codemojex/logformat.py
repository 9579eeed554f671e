"""What a process's log lines look like (CODEMOJEX_LOG_FORMAT): `text`, one line of time,
level, logger and message (the default, for a terminal and journald), or `json`, one JSON
object per line with the same fields (`time`, `level`, `logger`, `message`, and `exception`
for a traceback), for log pipelines that expect JSON lines. Either way every line goes
through the secrets' mask (codemojex/secrecy.py, which masks a secret as a JSON string
writes it too), and no line carries a message text unless --wire-debug says so."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Final, Literal

Format = Literal["text", "json"]
FORMAT: Final[Format] = "text"
TEXT: Final = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class JsonLines(logging.Formatter):
    """One JSON object per record, on one line (a traceback's newlines are escaped in it)."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, ensure_ascii=False)


def formatter(kind: Format) -> logging.Formatter:
    return JsonLines() if kind == "json" else logging.Formatter(TEXT)
