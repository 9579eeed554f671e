-- weight: a lane's share per wclaim turn. Serviceability does not depend on it, so no ring
-- changes. A weight of 1 is the default and is stored as no entry.
--
-- KEYS[1]  the queue prefix `emq:{q}:`
-- KEYS[2]  `emq:{q}:seq`, declared so a Redis Cluster refuses the script mid-migration (facade.py)
-- ARGV[1]  lane id          ARGV[2]  weight (>= 1)
-- Returns  1
--- @include "keys"
if tonumber(ARGV[2]) == 1 then
  redis.call('HDEL', GWEIGHT, ARGV[1])
else
  redis.call('HSET', GWEIGHT, ARGV[1], ARGV[2])
end
return 1
