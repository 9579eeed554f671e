"""What every verb of the lanes' facade shares: the script call (`Calls`, the base of `Lanes`
and of its families of verbs), a leased `Job` as a script's reply holds it, and the checks of
what a caller passes before it goes into a key name or a script's arguments."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from redis.commands.core import AsyncScript
from redis.exceptions import ResponseError

from codemojex.lanes import keys as K
from codemojex.lanes.errors import LaneError, LaneFull
from codemojex.lanes.scripts import source
from codemojex.values.redistypes import AnyRedis


@dataclass(frozen=True, slots=True)
class Job:
    """A leased job. `attempts` is the fencing token: ack/retry/extend present it."""

    id: str
    room: str
    lane: str
    payload: bytes
    attempts: int
    max_attempts: int
    seq: int
    enqueued_ms: int


def job_of(room: str, lane: str, fields: Sequence[Any]) -> Job:
    """A job from its six fields in a script's reply, in their order: id, payload, attempts,
    max attempts, seq, enqueued at."""
    job_id, payload, attempts, max_attempts, seq, enqueued_ms = fields
    return Job(job_id.decode(), room, lane, payload, attempts, max_attempts, seq, enqueued_ms)


def checked(value: object, name: str, low: int, high: int) -> int:
    """`value` when it is an integer in [low, high], else LaneError naming it."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise LaneError(f"{name} must be an integer in [{low}, {high}], got {value!r}")
    return value


def text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def token(job: Job) -> tuple[str, int]:
    """A job's id and fencing token, validated: they go into key names and script arguments."""
    return K.check_job(job.id), checked(job.attempts, "attempts", 0, 2**31)


def _translate(exc: ResponseError) -> Exception:
    message = str(exc)
    if message.startswith("LANEFULL "):
        return LaneFull(message[len("LANEFULL ") :])
    if message.startswith("LANEERR "):
        return LaneError(message[len("LANEERR ") :])
    return exc


class Calls:
    """The queue `queue` in `client`, and its scripts, each loaded at its first call."""

    def __init__(self, client: AnyRedis, queue: str) -> None:
        self.client = client
        self.keys = K.Keys(queue)
        self.queue = queue
        # KEYS[1] is the prefix the scripts build every name from; it names no key, so the
        # mint counter is declared too, as KEYS[2] (the scripts reach it by name). Two
        # declared keys, one never present: while the queue's slot is being migrated, Redis
        # refuses the script (TRYAGAIN) instead of running it on the importing node against
        # the keys that happen to have arrived there.
        self._declared = [self.keys.prefix, self.keys.seq]
        self._scripts: dict[str, AsyncScript] = {}

    async def _call(self, verb: str, *args: Any) -> Any:
        script = self._scripts.get(verb)
        if script is None:
            script = self.client.register_script(source(verb))
            self._scripts[verb] = script
        try:
            return await script(keys=self._declared, args=args)
        except ResponseError as exc:
            raise _translate(exc) from None
