-- A job was just ZADDed to `lane`'s pending zset (which now holds `depth` jobs). If the
-- lane was empty it became serviceable, and if it was the room's first serviceable lane,
-- the room may have become serviceable too; a paused lane is held off the ring instead
-- (the room's held set lists it, so a snapshot finds every lane with work cheaply).
--- @include "keys"
--- @include "is_paused"
--- @include "room_open"
--- @include "ring_room"
local function lane_filled(room, lane, depth)
  if depth == 1 then
    if is_paused(lane) then
      redis.call('SADD', room_held_key(room), lane)
    elseif redis.call('RPUSH', lane_ring_key(room), lane) == 1 and room_open(room) then
      ring_room(room)
    end
  end
end
