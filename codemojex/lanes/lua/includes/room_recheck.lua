-- Admin verbs only (they may scan a ring): re-establish the membership of `room` on the
-- room ring after a change, given whether it was serviceable (= on the ring) before.
--- @include "keys"
--- @include "room_serviceable"
--- @include "ring_room"
local function room_recheck(room, before)
  local after = room_serviceable(room)
  if before and not after then
    redis.call('LREM', RING, 0, room)
  elseif after and not before then
    ring_room(room)
  end
end
