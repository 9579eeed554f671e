-- reap: every lease past its deadline goes back to its lane at its original seq, or to
-- `dead` when its attempts are spent; its permit is freed. Idempotent; any worker runs it.
--
-- KEYS[1]  the queue prefix `emq:{q}:`
-- KEYS[2]  `emq:{q}:seq`, declared so a Redis Cluster refuses the script mid-migration (facade.py)
-- ARGV[1]  at most this many leases per call
-- Returns  how many leases were reaped
--- @include "keys"
--- @include "now_ms"
--- @include "permit_freed"
--- @include "put_back"
--- @include "job_get"
--- @include "job_set"
local now = now_ms()
local ids = redis.call('ZRANGEBYSCORE', ACTIVE, '-inf', now, 'LIMIT', 0, tonumber(ARGV[1]))
for _, id in ipairs(ids) do
  redis.call('ZREM', ACTIVE, id)
  local jk = job_key(id)
  local f, old = job_get(jk, 'r', 'l', 's', 'a', 'm')
  if f[1] then
    permit_freed(f[1], 1)
    if tonumber(f[4] or '0') >= tonumber(f[5]) then
      redis.call('ZADD', DEAD, now, id)
      job_set(jk, old, 't', 'dead', 'x', 'lease expired')
    else
      put_back(id, jk, f[1], f[2], f[3], old)
    end
  end
end
return #ids
