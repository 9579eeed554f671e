-- Put job `id` into `lane`'s pending zset at `seq` (enqueue, requeue, reassign): the books
-- (an older job than the head, a requeued one, becomes the head: ZADD LT), then the rings.
--- @include "keys"
--- @include "pending_changed"
--- @include "lane_filled"
local function pend(room, lane, id, seq)
  local pk = pending_key(lane)
  redis.call('ZADD', pk, seq, id)
  pending_changed(room, 1)
  redis.call('ZADD', LHEAD, 'LT', seq, lane)
  lane_filled(room, lane, redis.call('ZCARD', pk))
end
