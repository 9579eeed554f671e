-- The enqueued_ms of `room`'s oldest pending job (-1 = none): the lowest head seq of its lanes
-- with work (its lane ring and its held set: paused lanes), never of every lane it has had.
--- @include "keys"
--- @include "job_get"
local function room_oldest(room)
  local lanes = redis.call('LRANGE', lane_ring_key(room), 0, -1)
  for _, lane in ipairs(redis.call('SMEMBERS', room_held_key(room))) do lanes[#lanes + 1] = lane end
  if #lanes == 0 then return -1 end
  local heads = redis.call('ZMSCORE', LHEAD, unpack(lanes))
  local best, best_lane = nil, nil
  for i, seq in ipairs(heads) do
    if seq and (not best or tonumber(seq) < best) then best, best_lane = tonumber(seq), lanes[i] end
  end
  if not best_lane then return -1 end
  local id = redis.call('ZRANGE', pending_key(best_lane), 0, 0)[1]
  if not id then return -1 end
  return tonumber(job_get(job_key(id), 'e')[1] or '-1')
end
