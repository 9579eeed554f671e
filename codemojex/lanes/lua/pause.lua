-- pause: park a room (it leaves the room ring, keeps its lane ring) or a lane (it leaves
-- its room's lane ring for the room's held set; the room leaves the ring if that was its
-- last lane). Backlog and in-flight work are untouched; new jobs are still accepted.
--
-- KEYS[1]  the queue prefix `emq:{q}:`
-- KEYS[2]  `emq:{q}:seq`, declared so a Redis Cluster refuses the script mid-migration (facade.py)
-- ARGV[1]  room or lane id  ARGV[2]  'room' or 'lane'
-- Returns  1 when newly paused, 0 when it already was
--- @include "keys"
--- @include "lane_unring"
--- @include "room_recheck"
--- @include "room_serviceable"
local x = ARGV[1]
if ARGV[2] == 'room' then
  local before = room_serviceable(x)
  if redis.call('SADD', PAUSED, x) == 0 then return 0 end
  room_recheck(x, before)
  return 1
end
if redis.call('SADD', PAUSED, x) == 0 then return 0 end
local room = redis.call('HGET', LROOM, x)
if room and redis.call('ZCARD', pending_key(x)) > 0 then
  lane_unring(room, x)
  redis.call('SADD', room_held_key(room), x)
end
return 1
