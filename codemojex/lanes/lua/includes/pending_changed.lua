-- `n` jobs of `room` entered (n > 0) or left (n < 0) a pending zset: the operators' books
-- (stats, rooms; lanes.md "What operators read") `npending` (all pending jobs; absent at 0)
-- and `rdepth` (room -> its pending jobs, rooms with none absent), kept wherever jobs move
-- so that reading them never walks the rooms (`lhead`, the lanes' heads: head_changed, pend).
--- @include "keys"
local function pending_changed(room, n)
  if redis.call('INCRBY', NPENDING, n) <= 0 then redis.call('DEL', NPENDING) end
  if tonumber(redis.call('ZINCRBY', RDEPTH, n, room)) <= 0 then
    redis.call('ZREM', RDEPTH, room)
  end
end
