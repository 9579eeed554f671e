"""Draining a queue's lanes the way a worker claims them."""

from __future__ import annotations

from codemojex.lanes import Job, Lanes

# Long enough that no claim made by a test expires while the test holds it.
LEASE_MS = 10_000


async def claim_all(lanes: Lanes, lease_ms: int = LEASE_MS) -> list[list[Job]]:
    """Every batch the weighted claim hands out until the lanes give nothing more."""
    batches: list[list[Job]] = []
    while batch := await lanes.wclaim(lease_ms):
        batches.append(batch)
    return batches
