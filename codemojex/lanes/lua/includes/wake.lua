-- One wake token for a parked consumer (the list is capped at 64: tokens need not add up).
--- @include "keys"
local function wake()
  redis.call('LPUSH', WAKE, '1')
  redis.call('LTRIM', WAKE, 0, 63)
end
