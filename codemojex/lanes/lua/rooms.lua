-- rooms: the queue's side of some rooms (a page of the ops page's rooms table; the caller
-- bounds how many). A room costs what its lanes with pending jobs cost (its lane ring and
-- held set), never the list of every lane it has had.
--
-- KEYS[1]  the queue prefix `emq:{q}:`
-- KEYS[2]  `emq:{q}:seq`, declared so a Redis Cluster refuses the script mid-migration (facade.py)
-- ARGV     room ids
-- Returns  per room, in the order given: {room, pending, in flight, ceiling (-1 = none),
--          paused 0/1, the oldest pending job's enqueued_ms (-1 = none), the last enqueue
--          in ms (-1 = none within the lanes' idle time)}
local out = {}
for _, room in ipairs(ARGV) do
  local lanes = redis.call('LRANGE', lane_ring_key(room), 0, -1)
  for _, lane in ipairs(redis.call('SMEMBERS', room_held_key(room))) do lanes[#lanes + 1] = lane end
  local oldest = -1
  if #lanes > 0 then
    local heads = redis.call('ZMSCORE', LHEAD, unpack(lanes))
    local best, best_lane = nil, nil
    for i, seq in ipairs(heads) do
      if seq and (not best or tonumber(seq) < best) then best, best_lane = tonumber(seq), lanes[i] end
    end
    if best_lane then
      local id = redis.call('ZRANGE', pending_key(best_lane), 0, 0)[1]
      if id then oldest = tonumber(redis.call('HGET', job_key(id), 'enqueued_ms') or '-1') end
    end
  end
  out[#out + 1] = {room, tonumber(redis.call('ZSCORE', RDEPTH, room) or '0'),
    tonumber(redis.call('HGET', GACTIVE, room) or '0'),
    tonumber(redis.call('HGET', GLIMIT, room) or '-1'),
    redis.call('SISMEMBER', PAUSED, room), oldest,
    tonumber(redis.call('ZSCORE', RSEEN, room) or '-1')}
end
return out
