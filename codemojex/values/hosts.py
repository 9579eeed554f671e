"""Where a process listens and talks: a TCP port's range, and whether a host is this machine
(the one place plain http may carry a secret: the Bot API URL with the token, the ops page's
cookie)."""

from __future__ import annotations

import ipaddress
from typing import Annotated

from pydantic import Field

# A TCP port to listen on (the webhook, the metrics, the ops page).
Port = Annotated[int, Field(ge=1, le=65535)]


def is_loopback(host: str | None) -> bool:
    """127.0.0.0/8, ::1 or "localhost": this machine alone (a name is not resolved)."""
    if host is None:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
