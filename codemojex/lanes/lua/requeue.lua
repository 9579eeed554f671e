-- requeue: a dead job back into its lane at its seq (so it comes first in its lane, as a
-- retry would), with its attempts allowance given again. The attempts count on (they are the
-- fencing token: a lease of an earlier life can never ack the new one); max_attempts grows by
-- the allowance. A lane forgotten meanwhile is bound to the job's room again.
--
-- KEYS[1]  the queue prefix `emq:{q}:`
-- KEYS[2]  `emq:{q}:seq`, declared so a Redis Cluster refuses the script mid-migration (facade.py)
-- ARGV[1]  job id
-- Returns  1 when the job is pending again, 0 when it is not a dead job (any more)
-- Errors   LANEERR when its lane is bound to another room now (nothing is written)
--- @include "keys"
--- @include "bind"
--- @include "now_ms"
--- @include "pend"
--- @include "job_get"
--- @include "job_set"
local id = ARGV[1]
if not redis.call('ZSCORE', DEAD, id) then return 0 end
local jk = job_key(id)
local f, old = job_get(jk, 'r', 'l', 's', 'a', 'm')
if not (f[1] and f[2] and f[3]) then return 0 end
local room, lane = f[1], f[2]
local bound = redis.call('HGET', LROOM, lane)
if bound and bound ~= room then
  return redis.error_reply('LANEERR cannot requeue job ' .. id .. ' of room ' .. room ..
    ': its lane ' .. lane .. ' is bound to room ' .. bound)
end
redis.call('ZREM', DEAD, id)
if not bound then bind(room, lane) end
redis.call('ZADD', LSEEN, now_ms(), lane)
job_set(jk, old, 't', 'pending', 'm', tonumber(f[4] or '0') + tonumber(f[5] or '0'))
pend(room, lane, id, f[3])
return 1
