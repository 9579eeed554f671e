-- retry: a typed retry of a leased job: to `delayed` while attempts remain, else `dead`.
-- Frees the permit like ack. A stale token is refused and changes nothing.
--
-- KEYS[1]  the queue prefix `emq:{q}:`
-- KEYS[2]  `emq:{q}:seq`, declared so a Redis Cluster refuses the script mid-migration (facade.py)
-- ARGV[1]  job id      ARGV[2]  attempts (token)      ARGV[3]  delay in ms
-- ARGV[4]  error text (stored as last_error)
-- Returns  'delayed', 'dead' or 'stale'
--- @include "keys"
--- @include "delayed_added"
--- @include "holder"
--- @include "job_get"
--- @include "job_set"
--- @include "now_ms"
--- @include "permit_freed"
local id = ARGV[1]
local jk, room, old = holder(id, ARGV[2])
if not jk then return 'stale' end
redis.call('ZREM', ACTIVE, id)
local f = job_get(jk, 'l', 'a', 'm')
local now = now_ms()
local outcome
if tonumber(f[2]) >= tonumber(f[3]) then
  redis.call('ZADD', DEAD, now, id)
  outcome = 'dead'
else
  redis.call('ZADD', DELAYED, now + tonumber(ARGV[3]), id)
  delayed_added(f[1])
  outcome = 'delayed'
end
job_set(jk, old, 't', outcome, 'x', ARGV[4])
permit_freed(room, 1)
return outcome
