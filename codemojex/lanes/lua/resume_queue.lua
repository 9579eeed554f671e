-- resume_queue: claims are served again; a wake when there is work waiting.
--
-- KEYS[1]  the queue prefix `emq:{q}:`
-- KEYS[2]  `emq:{q}:seq`, declared so a Redis Cluster refuses the script mid-migration (facade.py)
-- ARGV     none
-- Returns  1 when it was paused, 0 otherwise
--- @include "keys"
--- @include "wake"
local n = redis.call('DEL', QPAUSED)
if n == 1 and redis.call('LLEN', RING) > 0 then wake() end
return n
