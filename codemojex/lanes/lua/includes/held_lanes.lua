-- the lanes of `room` that belong in its held set: paused, with pending jobs
--- @include "keys"
--- @include "is_paused"
local function held_lanes(S, room)
  local out = {}
  for lane in pairs(S.room_lanes[room] or {}) do
    if is_paused(lane) and redis.call('ZCARD', pending_key(lane)) > 0 then out[lane] = true end
  end
  return out
end
