"""Who is asking, and over what: the ops page behind a TLS proxy (CODEMOJEX_OPS_TRUSTED_PROXIES).

A request that comes from a trusted proxy is believed about the client it forwards: its
address (the login budget is per address) and its scheme (https: the session cookie is
`Secure` with the `__Host-` prefix, and answers carry HSTS). RFC 7239 `Forwarded` is read when
present, else `X-Forwarded-For` / `X-Forwarded-Proto`. Each proxy adds the node that connected
to it at the right, so the list is walked from the right past our own proxies: the first hop
that is not one of them is the client (what a client wrote further left is its own invention).
From anyone else these headers are ignored: a client on the page's port directly cannot claim
another address, or https.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from aiohttp import web

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
HSTS: Final = "max-age=63072000"  # two years, this host only (the page may share a domain)


@dataclass(frozen=True, slots=True)
class Peer:
    """The client as the page believes it: its address and whether it speaks https."""

    address: str
    https: bool


def _address(raw: str) -> str:
    """A `for=` / X-Forwarded-For node without its port or IPv6 brackets ("unknown" and
    obfuscated identifiers stay as given: an address of their own for the budget)."""
    node = raw.strip().strip('"')
    if node.startswith("["):
        return node[1:].split("]", 1)[0]
    if node.count(":") == 1:  # IPv4 with a port
        return node.split(":", 1)[0]
    return node


class TrustedProxies:
    def __init__(self, networks: Sequence[Network] = ()) -> None:
        self._networks = tuple(networks)

    def trusts(self, address: str | None) -> bool:
        if not address or not self._networks:
            return False
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip in net for net in self._networks)

    def peer(self, request: web.Request) -> Peer:
        remote = request.remote or ""
        direct = Peer(remote, request.secure)  # TLS on the page's own socket
        if not self.trusts(remote):
            return direct
        try:
            forwarded = request.forwarded
        except ValueError:
            forwarded = ()
        if forwarded:
            hops = [(_address(str(e.get("for", ""))), str(e.get("proto", ""))) for e in forwarded]
        else:
            hops = self._x_forwarded(request)
        if not hops:
            return direct
        # The first hop from the right that is not one of our proxies is the client.
        chosen = hops[0]
        for hop in reversed(hops):
            chosen = hop
            if not self.trusts(hop[0]):
                break
        address, proto = chosen
        https = proto.strip().lower() == "https" if proto else direct.https
        return Peer(address or remote, https)

    @staticmethod
    def _x_forwarded(request: web.Request) -> list[tuple[str, str]]:
        hosts = [
            _address(h) for v in request.headers.getall("X-Forwarded-For", []) for h in v.split(",")
        ]
        protos = [
            p.strip() for v in request.headers.getall("X-Forwarded-Proto", []) for p in v.split(",")
        ]
        if not hosts and not protos:
            return []
        if len(protos) == len(hosts):  # one scheme per hop
            return list(zip(hosts, protos, strict=True))
        # Usually one scheme, set by the proxy next to us for the whole chain.
        last = protos[-1] if protos else ""
        return [(host, last) for host in hosts] or [(request.remote or "", last)]
