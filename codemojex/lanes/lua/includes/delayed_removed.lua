-- The other side of delayed_added: a job of the lane left `delayed`.
--- @include "keys"
local function delayed_removed(lane)
  if redis.call('HINCRBY', LDELAYED, lane, -1) <= 0 then redis.call('HDEL', LDELAYED, lane) end
end
