"""The admin verbs of the lanes' facade (`Lanes` has them): a room's ceiling, a player's weight,
pauses of a room, a lane or the whole queue, a pending job moved or a lane purged, and the
snapshot `codemojex lanes snapshot` prints."""

from __future__ import annotations

from typing import Any, Final

from codemojex.lanes import keys as K
from codemojex.lanes.calls import Calls, checked
from codemojex.limits import ROOM
from codemojex.values import ids

# A player's heads per turn of their room's lane ring (/weight sets it).
WEIGHT_MIN: Final = 1
WEIGHT_MAX: Final = 100


class AdminVerbs(Calls):
    async def limit(self, room: str, n: int) -> None:
        ceiling = checked(n, "ceiling", ROOM.ceiling_min, ROOM.ceiling_max)
        await self._call("limit", K.check_room(room), ceiling)

    async def unlimit(self, room: str) -> None:
        await self._call("unlimit", K.check_room(room))

    async def weight(self, lane: str, w: int) -> None:
        await self._call("weight", K.check_lane(lane), checked(w, "weight", WEIGHT_MIN, WEIGHT_MAX))

    @staticmethod
    def _kind(room_or_lane: str) -> str:
        return "room" if ids.brand_of(K.check_room_or_lane(room_or_lane)) == ids.ROOM else "lane"

    async def pause(self, room_or_lane: str) -> None:
        await self._call("pause", room_or_lane, self._kind(room_or_lane))

    async def resume(self, room_or_lane: str) -> None:
        await self._call("resume", room_or_lane, self._kind(room_or_lane))

    async def is_paused(self, room: str) -> bool:
        """Whether the room itself is paused (the queue's own pause aside): one read."""
        return bool(await self.client.sismember(self.keys.paused, K.check_room(room)))

    async def pause_queue(self) -> None:
        await self._call("pause_queue")

    async def resume_queue(self) -> None:
        await self._call("resume_queue")

    async def reassign(self, job_id: str, lane: str) -> bool:
        """Move a pending job to another lane of its room at its seq; False if not pending."""
        return bool(await self._call("reassign", K.check_job(job_id), K.check_lane(lane)))

    async def purge(self, lane: str) -> int:
        """Move a lane's pending jobs to dead; how many."""
        return int(await self._call("purge", K.check_lane(lane)))

    async def snapshot(self, room: str | None = None) -> dict[str, Any]:
        """Depths, in flight, ceilings, weights, ring order and pauses (see the package
        docstring). A room's "lanes" are those holding pending jobs: a room's snapshot costs
        what those cost, however many players the room has had."""
        arg = "" if room is None else K.check_room(room)
        qpaused, ring, active, delayed, dead, rooms = await self._call("snapshot", arg)
        return {
            "queue": self.queue,
            "paused": bool(qpaused),
            "ring": [r.decode() for r in ring],
            "active": active,
            "delayed": delayed,
            "dead": dead,
            "rooms": {
                r.decode(): {
                    "paused": bool(paused),
                    "ceiling": None if ceiling < 0 else ceiling,
                    "in_flight": in_flight,
                    "ring": [x.decode() for x in lane_ring],
                    "pending": sum(lane[1] for lane in lanes),
                    "lanes": {
                        lane.decode(): {"depth": depth, "weight": w, "paused": bool(lp)}
                        for lane, depth, w, lp in lanes
                    },
                }
                for r, paused, ceiling, in_flight, lane_ring, lanes in rooms
            },
        }
