-- a lane belongs on its room's lane ring: it has pending jobs and is not paused
--- @include "keys"
--- @include "is_paused"
local function lane_ok(lane)
  return redis.call('ZCARD', pending_key(lane)) > 0 and not is_paused(lane)
end
