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
--- @include "keys"
--- @include "room_oldest"
local out = {}
for _, room in ipairs(ARGV) do
  local oldest = room_oldest(room)
  out[#out + 1] = {room, tonumber(redis.call('ZSCORE', RDEPTH, room) or '0'),
    tonumber(redis.call('HGET', GACTIVE, room) or '0'),
    tonumber(redis.call('HGET', GLIMIT, room) or '-1'),
    redis.call('SISMEMBER', PAUSED, room), oldest,
    tonumber(redis.call('ZSCORE', RSEEN, room) or '-1')}
end
return out
