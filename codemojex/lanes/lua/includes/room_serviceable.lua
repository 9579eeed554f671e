-- A room belongs on the room ring: open (not paused, below its ceiling) with a lane on its
-- lane ring (invariant 2 of docs/lanes.md).
--- @include "keys"
--- @include "room_open"
local function room_serviceable(room)
  return room_open(room) and redis.call('LLEN', lane_ring_key(room)) > 0
end
