-- promote: delayed jobs that are due go back to their lanes at their original seq.
--
-- KEYS[1]  the queue prefix `emq:{q}:`
-- KEYS[2]  `emq:{q}:seq`, declared so a Redis Cluster refuses the script mid-migration (facade.py)
-- ARGV[1]  at most this many jobs per call
-- Returns  how many jobs were promoted
--- @include "keys"
--- @include "delayed_removed"
--- @include "now_ms"
--- @include "put_back"
--- @include "job_get"
local ids = redis.call('ZRANGEBYSCORE', DELAYED, '-inf', now_ms(), 'LIMIT', 0,
  tonumber(ARGV[1]))
local n = 0
for _, id in ipairs(ids) do
  redis.call('ZREM', DELAYED, id)
  local jk = job_key(id)
  local f, old = job_get(jk, 'r', 'l', 's')
  if f[1] then
    delayed_removed(f[2])
    put_back(id, jk, f[1], f[2], f[3], old)
    n = n + 1
  end
end
return n
