-- Bind a lane to its room for as long as the lanes remember it (enqueue, reassign).
--- @include "keys"
local function bind(room, lane)
  redis.call('HSET', LROOM, lane, room)
  redis.call('SADD', room_lanes_key(room), lane)
end
