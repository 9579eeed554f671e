-- why a room is not serviceable given the true in-flight count; nil when it is
--- @include "keys"
--- @include "is_paused"
--- @include "lane_ok"
local function room_block(S, room, act)
  if is_paused(room) then return 'paused' end
  local lim = redis.call('HGET', GLIMIT, room)
  if lim and act >= tonumber(lim) then
    return 'at its ceiling (' .. act .. ' in flight, ceiling ' .. lim .. ')'
  end
  for lane in pairs(S.room_lanes[room] or {}) do
    if lane_ok(lane) then return nil end
  end
  return 'no serviceable lane'
end
