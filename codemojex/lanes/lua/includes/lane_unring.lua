-- Admin verbs only: `lane` (of `room`) stops being serviceable while it is on its ring.
--- @include "keys"
--- @include "room_serviceable"
--- @include "room_recheck"
local function lane_unring(room, lane)
  local rr = lane_ring_key(room)
  local before = room_serviceable(room)
  redis.call('LREM', rr, 0, lane)
  room_recheck(room, before)
end
