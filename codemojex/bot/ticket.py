"""One update in the door's hands (door.py), and what the door has the handlers' side say for
it: the record the door's parts (order.py, handling.py, clock.py) pass between them."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from telegram import Update

from codemojex.bot.tries import Down

Settlement = Literal["done", "parked", "dead", "shed", "given_back"]


@dataclass(frozen=True, slots=True)
class DoorHooks:
    """What the door has the handlers' side do for it (app.py wires these; each is best
    effort, run off the update's path, never awaited by it)."""

    # An outage holds it past its deadline (each try): "catching up", once per outage.
    delayed: Callable[[Update], Awaitable[None]]
    shed: Callable[[Update], Awaitable[None]]  # too many waiting: "slow down"
    dead: Callable[[Update], Awaitable[None]]  # given up: "something went wrong"
    down: Down  # is this component down? (its health probe: bot/tries.py)


@dataclass(eq=False, slots=True)
class Ticket:
    """One update in the door's hands, until it is settled and then finished."""

    update: Update
    raw: dict[str, Any] | bytes  # Telegram's JSON as it came: what parking keeps
    key: str  # its order key (order.py `order_key`)
    born: float = field(default_factory=time.monotonic)
    tries: int = 0  # tries failed, whatever failed them (bot/tries.py)
    waits: bool = False  # its last try failed with an outage, waited out
    parked: bool = False
    running: bool = False
    told: bool = False  # its sender was told it waits for an outage
    dropped: bool = False  # given back or shed: the door no longer works on it
    settled: asyncio.Future[Settlement] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )

    @property
    def update_id(self) -> int:
        return self.update.update_id
