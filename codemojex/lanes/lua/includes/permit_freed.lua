-- `n` of `room`'s jobs left `active`: give back their permits. Only a room that was held
-- at its ceiling (gactive >= glimit before, below it now) can become serviceable here.
--- @include "keys"
--- @include "is_paused"
--- @include "ring_room"
local function permit_freed(room, n)
  local act = redis.call('HINCRBY', GACTIVE, room, -n)
  if act <= 0 then redis.call('HDEL', GACTIVE, room) end
  local lim = redis.call('HGET', GLIMIT, room)
  if lim then
    lim = tonumber(lim)
    if act < lim and act + n >= lim and not is_paused(room)
        and redis.call('LLEN', lane_ring_key(room)) > 0 then
      ring_room(room)
    end
  end
end
