"""Who is asking, and over what: the ops page behind a TLS proxy (CODEMOJEX_OPS_TRUSTED_PROXIES).

A request that comes from a trusted proxy is believed about the client it forwards, in the
two headers the shipped proxies set (deploy/nginx/codemojex-ops.conf, the Kubernetes
example's ingress-nginx): `X-Forwarded-For` (the login budget is per address) and
`X-Forwarded-Proto` (https: the session cookie is `Secure` with the `__Host-` prefix, and
answers carry HSTS). RFC 7239 `Forwarded` is never read: neither nginx nor ingress-nginx
writes it, so whatever it holds came from the client unchanged (the examples clear it all
the same). Believing it first let anyone claim a new address with each try.

Each proxy writes the node that connected to it at the right of `X-Forwarded-For` (nginx
and ingress-nginx replace the header with that one address; a proxy that appends keeps
what came before it on the left). So the list is read from the right, past our own
proxies: the first entry that is not one of them is the client, and whatever stands
further left is the client's own invention. The scheme is the rightmost
`X-Forwarded-Proto`: the one the proxy next to us set. From anyone else these headers are
ignored: a client on the page's port directly cannot claim another address, or https.
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
    """An X-Forwarded-For entry without its port or IPv6 brackets (a name or "unknown" stays
    as given: an address of its own for the budget)."""
    node = raw.strip().strip('"')
    if node.startswith("["):
        return node[1:].split("]", 1)[0]
    if node.count(":") == 1:  # IPv4 with a port
        return node.split(":", 1)[0]
    return node


def _entries(request: web.Request, header: str) -> list[str]:
    """Every comma-separated entry of every `header` line, in order (a repeated header is
    one list, RFC 9110 5.3)."""
    return [e.strip() for line in request.headers.getall(header, []) for e in line.split(",")]


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
        if not self.trusts(remote):
            return Peer(remote, request.secure)  # TLS on the page's own socket, if any
        hops = [_address(e) for e in _entries(request, "X-Forwarded-For")]
        hops = [h for h in hops if h]
        address = remote  # no client named: the proxy asks for itself
        for hop in reversed(hops):
            address = hop
            if not self.trusts(hop):
                break  # the rightmost entry that is not ours: the client
        protos = [p for p in _entries(request, "X-Forwarded-Proto") if p]
        https = protos[-1].lower() == "https" if protos else request.secure
        return Peer(address, https)
