-- `lane` lost its head (claimed, moved): read the new one. Returns whether it has one.
--- @include "keys"
local function head_changed(lane)
  local pk = pending_key(lane)
  local head = redis.call('ZRANGE', pk, 0, 0, 'WITHSCORES')
  if #head == 0 then
    redis.call('ZREM', LHEAD, lane)
    return false
  end
  redis.call('ZADD', LHEAD, head[2], lane)
  return true
end
