-- A lane that holds work and is not paused joins its room's lane ring (resume).
--- @include "keys"
--- @include "room_open"
--- @include "ring_room"
local function lane_join(room, lane)
  if redis.call('RPUSH', lane_ring_key(room), lane) == 1 and room_open(room) then
    ring_room(room)
  end
end
