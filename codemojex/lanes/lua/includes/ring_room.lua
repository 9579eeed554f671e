-- Put a room on the room ring after a false -> true transition, with a wake.
--- @include "keys"
--- @include "wake"
local function ring_room(room)
  redis.call('RPUSH', RING, room)
  wake()
end
