"""The Redis keys of the ops concern, built here alone: `cmx:{q}:ops:…` (the `{q}` hash tag
keeps them on the queue's Redis Cluster slot, beside the lanes and the posting keys).

| key | type | holds |
| --- | --- | --- |
| `cmx:{q}:ops:procs` | zset | process id -> when it last published (ms) |
| `cmx:{q}:ops:proc:<id>` | hash | that process's kind, pid, host and counters; expires |
"""

from __future__ import annotations

import re
from typing import Final

from codemojex.lanes.keys import check_queue

_PROC: Final = re.compile(r"[0-9a-f]{16}\Z")


def check_proc(proc_id: str) -> str:
    if not _PROC.match(proc_id):
        raise ValueError(f"not a process id (16 hex digits): {proc_id!r}")
    return proc_id


class OpsKeys:
    __slots__ = ("prefix",)

    def __init__(self, queue: str) -> None:
        self.prefix = f"cmx:{{{check_queue(queue)}}}:ops:"

    @property
    def procs(self) -> str:
        return self.prefix + "procs"

    def proc(self, proc_id: str) -> str:
        return self.prefix + "proc:" + check_proc(proc_id)
