-- resume: unpark a room or a lane; it comes back on its ring when serviceable, with a wake.
--
-- KEYS[1]  the queue prefix `emq:{q}:`
-- KEYS[2]  `emq:{q}:seq`, declared so a Redis Cluster refuses the script mid-migration (facade.py)
-- ARGV[1]  room or lane id  ARGV[2]  'room' or 'lane'
-- Returns  1 when it was paused, 0 otherwise
--- @include "keys"
--- @include "lane_join"
--- @include "room_recheck"
local x = ARGV[1]
if ARGV[2] == 'room' then
  if redis.call('SREM', PAUSED, x) == 0 then return 0 end
  room_recheck(x, false)
  return 1
end
if redis.call('SREM', PAUSED, x) == 0 then return 0 end
local room = redis.call('HGET', LROOM, x)
if room and redis.call('ZCARD', pending_key(x)) > 0 then
  redis.call('SREM', room_held_key(room), x)
  lane_join(room, x)
end
return 1
