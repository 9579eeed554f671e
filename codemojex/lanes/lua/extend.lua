-- extend: move a lease's deadline to server TIME + lease (a heartbeat for long work).
--
-- KEYS[1]  the queue prefix `emq:{q}:`
-- KEYS[2]  `emq:{q}:seq`, declared so a Redis Cluster refuses the script mid-migration (facade.py)
-- ARGV[1]  job id      ARGV[2]  attempts (token)      ARGV[3]  lease in ms
-- Returns  1 when extended, 0 when the token is stale
--- @include "keys"
--- @include "holder"
--- @include "now_ms"
local jk = holder(ARGV[1], ARGV[2])
if not jk then return 0 end
redis.call('ZADD', ACTIVE, 'XX', now_ms() + tonumber(ARGV[3]), ARGV[1])
return 1
