-- retain: one bounded batch of retention, run by the consumers' maintenance. Dead jobs
-- beyond the cap (the oldest first) or older than the age go, with their hashes; lanes
-- whose last enqueue is older than the idle time and that hold no job (none pending,
-- delayed or, as their room has none, in flight) are forgotten: their lroom entry, room
-- listing and lseen entry go, and a room's `rseen` entry after the same idle time. An admin's weight or pause on a lane is kept (it applies again
-- when the lane comes back). A lane that still holds work is looked at again later.
--
-- KEYS[1]  the queue prefix `emq:{q}:`
-- KEYS[2]  `emq:{q}:seq`, declared so a Redis Cluster refuses the script mid-migration (facade.py)
-- ARGV[1]  dead jobs kept at most (0 = none)     ARGV[2]  dead jobs' age limit in ms
-- ARGV[3]  idle time in ms before a lane is forgotten
-- ARGV[4]  ms before a lane whose room has jobs in flight is looked at again
-- ARGV[5]  at most this many dead jobs, and this many lanes, per call
-- Returns  {dead jobs deleted, lanes forgotten}
--- @include "keys"
--- @include "now_ms"
local now = now_ms()
local batch = tonumber(ARGV[5])

-- A job in `dead` goes with its hash; a hash whose state says otherwise (a damaged keyspace:
-- the job is also elsewhere) is kept for repair.
local function drop_dead(id)
  local jk = job_key(id)
  local f = redis.call('HMGET', jk, 't', 'state')  -- either layout: it is deleted
  local state = f[1] or f[2]
  if not state or state == 'dead' then redis.call('DEL', jk) end
end

local trimmed = 0
local over = redis.call('ZCARD', DEAD) - tonumber(ARGV[1])
if over > 0 then
  local popped = redis.call('ZPOPMIN', DEAD, math.min(over, batch))
  for i = 1, #popped, 2 do drop_dead(popped[i]) end
  trimmed = #popped / 2
end
if trimmed < batch then
  local old = redis.call('ZRANGEBYSCORE', DEAD, '-inf', '(' .. (now - tonumber(ARGV[2])),
    'LIMIT', 0, batch - trimmed)
  for _, id in ipairs(old) do
    redis.call('ZREM', DEAD, id)
    drop_dead(id)
  end
  trimmed = trimmed + #old
end

local idle = tonumber(ARGV[3])
local forgotten = 0
local due = redis.call('ZRANGEBYSCORE', LSEEN, '-inf', '(' .. (now - idle), 'LIMIT', 0, batch)
for _, lane in ipairs(due) do
  local room = redis.call('HGET', LROOM, lane)
  if not room then
    redis.call('ZREM', LSEEN, lane)  -- unreachable while the lanes' invariants hold
  elseif redis.call('EXISTS', pending_key(lane)) == 1
      or redis.call('HEXISTS', LDELAYED, lane) == 1 then
    redis.call('ZADD', LSEEN, now, lane)  -- seen holding work now
  elseif redis.call('HEXISTS', GACTIVE, room) == 1 then
    -- in flight is counted per room: some of it may be this lane's
    redis.call('ZADD', LSEEN, now - idle + tonumber(ARGV[4]), lane)
  else
    redis.call('HDEL', LROOM, lane)
    redis.call('SREM', room_lanes_key(room), lane)
    redis.call('ZREM', LSEEN, lane)
    forgotten = forgotten + 1
  end
end
-- a room's last enqueue (`rseen`, shown to operators) is forgotten after the same idle time
local stale = redis.call('ZRANGEBYSCORE', RSEEN, '-inf', '(' .. (now - idle), 'LIMIT', 0, batch)
if #stale > 0 then redis.call('ZREM', RSEEN, unpack(stale)) end
return {trimmed, forgotten}
