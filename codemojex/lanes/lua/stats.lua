-- stats: the queue's numbers for the metrics and the ops page, read from the books alone.
-- No walk over rooms, lanes or jobs: O(1) and O(log n) reads, plus the rooms in flight
-- (gactive: at most one room per busy consumer) and the paused set (what admins paused).
--
-- KEYS[1]  the queue prefix `emq:{q}:`
-- KEYS[2]  `emq:{q}:seq`, declared so a Redis Cluster refuses the script mid-migration (facade.py)
-- ARGV[1]  how many of the deepest rooms to list (0 = none)
-- Returns  {queue paused 0/1, pending, active, delayed, dead, rooms with pending jobs,
--          rooms serviceable (on the room ring), rooms with pending jobs held at their
--          ceiling, rooms paused, the oldest pending job's enqueued_ms (-1 = none),
--          the server's time in ms, deepest rooms} where deepest rooms is a list of
--          {room, pending, in flight}, deepest first
--- @include "keys"
--- @include "now_ms"
--- @include "job_get"
local at_ceiling = 0
local act = redis.call('HGETALL', GACTIVE)
for i = 1, #act, 2 do
  local lim = redis.call('HGET', GLIMIT, act[i])
  if lim and tonumber(act[i + 1]) >= tonumber(lim) and redis.call('ZSCORE', RDEPTH, act[i]) then
    at_ceiling = at_ceiling + 1
  end
end
local paused = 0
for _, x in ipairs(redis.call('SMEMBERS', PAUSED)) do
  if string.sub(x, 1, 3) == 'ROM' then paused = paused + 1 end
end
-- the lowest head seq is the oldest pending job (seqs are minted in enqueue order, and a
-- job keeps its seq and its enqueued_ms when it is retried or reaped)
local oldest = -1
local lane = redis.call('ZRANGE', LHEAD, 0, 0)[1]
if lane then
  local pk = pending_key(lane)
  local id = redis.call('ZRANGE', pk, 0, 0)[1]
  if id then oldest = tonumber(job_get(job_key(id), 'e')[1] or '-1') end
end
local deepest = {}
local top = tonumber(ARGV[1])
if top > 0 then
  local z = redis.call('ZREVRANGE', RDEPTH, 0, top - 1, 'WITHSCORES')
  for i = 1, #z, 2 do
    deepest[#deepest + 1] = {z[i], tonumber(z[i + 1]),
      tonumber(redis.call('HGET', GACTIVE, z[i]) or '0')}
  end
end
return {redis.call('EXISTS', QPAUSED), tonumber(redis.call('GET', NPENDING) or '0'),
  redis.call('ZCARD', ACTIVE), redis.call('ZCARD', DELAYED), redis.call('ZCARD', DEAD),
  redis.call('ZCARD', RDEPTH), redis.call('LLEN', RING), at_ceiling, paused, oldest, now_ms(),
  deepest}
