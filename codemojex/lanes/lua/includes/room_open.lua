-- A room is open: not paused and below its ceiling (its lane ring is not looked at).
--- @include "keys"
--- @include "is_paused"
local function room_open(room)
  if is_paused(room) then return false end
  local lim = redis.call('HGET', GLIMIT, room)
  if lim then
    local act = tonumber(redis.call('HGET', GACTIVE, room) or '0')
    if act >= tonumber(lim) then return false end
  end
  return true
end
