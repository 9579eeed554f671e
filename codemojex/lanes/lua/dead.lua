-- dead: a page of the dead jobs, the latest deaths first, with what an operator needs to
-- decide on a requeue (never the payload: it is the player's guess).
--
-- KEYS[1]  the queue prefix `emq:{q}:`
-- KEYS[2]  `emq:{q}:seq`, declared so a Redis Cluster refuses the script mid-migration (facade.py)
-- ARGV[1]  offset          ARGV[2]  at most this many
-- Returns  {dead jobs in all, jobs} where jobs is a list of {id, died ms, room, lane,
--          attempts, max_attempts, enqueued_ms, last_error ('' = none)}
--- @include "keys"
--- @include "job_get"
local z = redis.call('ZREVRANGE', DEAD, tonumber(ARGV[1]),
  tonumber(ARGV[1]) + tonumber(ARGV[2]) - 1, 'WITHSCORES')
local jobs = {}
for i = 1, #z, 2 do
  local f = job_get(job_key(z[i]), 'r', 'l', 'a', 'm', 'e', 'x')
  jobs[#jobs + 1] = {z[i], tonumber(z[i + 1]), f[1] or '', f[2] or '', tonumber(f[3] or '0'),
    tonumber(f[4] or '0'), tonumber(f[5] or '0'), f[6] or ''}
end
return {redis.call('ZCARD', DEAD), jobs}
