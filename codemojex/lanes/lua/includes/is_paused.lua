-- Whether a room or a lane is paused (both are members of the `paused` set).
--- @include "keys"
local function is_paused(x) return redis.call('SISMEMBER', PAUSED, x) == 1 end
