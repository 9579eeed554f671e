-- ack: complete one leased job. A stale token is refused and changes nothing.
--
-- KEYS[1]  the queue prefix `emq:{q}:`
-- KEYS[2]  `emq:{q}:seq`, declared so a Redis Cluster refuses the script mid-migration (facade.py)
-- ARGV[1]  job id           ARGV[2]  attempts (the fencing token)
-- Returns  1 when acked, 0 when the token is stale
--- @include "keys"
--- @include "holder"
--- @include "permit_freed"
local jk, room = holder(ARGV[1], ARGV[2])
if not jk then return 0 end
redis.call('ZREM', ACTIVE, ARGV[1])
redis.call('DEL', jk)
permit_freed(room, 1)
return 1
