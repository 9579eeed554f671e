-- OLDER VERSION, a test fixture: the lanes' `promote` script exactly as Codemojex at
-- commit 70076ac built it (codemojex/lanes/scripts.py `source`), the last version that
-- wrote and read the job hash under its long field names (payload, attempts, state, ...;
-- the short names came with 8598b25). What a worker of that version runs: kept to test
-- a mixed pool of older and newer workers on one queue (tests/lanes/test_rolling_deploy.py).
-- Never edit it to fit the current code: it stands for code already deployed.
-- promote: delayed jobs that are due go back to their lanes at their original seq.
--
-- KEYS[1]  the queue prefix `emq:{q}:`
-- KEYS[2]  `emq:{q}:seq`, declared so a Redis Cluster refuses the script mid-migration (facade.py)
-- ARGV[1]  at most this many jobs per call
-- Returns  how many jobs were promoted
local P = KEYS[1]
local RING = P .. 'ring'
local GLIMIT = P .. 'glimit'
local GACTIVE = P .. 'gactive'
local PAUSED = P .. 'paused'
local DELAYED = P .. 'delayed'
local WAKE = P .. 'wake'
local LDELAYED = P .. 'ldelayed'
local NPENDING = P .. 'npending'
local RDEPTH = P .. 'rdepth'
local LHEAD = P .. 'lhead'
local function job_key(id) return P .. 'job:' .. id end
local function pending_key(lane) return P .. 'g:' .. lane .. ':pending' end
local function lane_ring_key(room) return P .. 'r:' .. room .. ':ring' end
local function room_held_key(room) return P .. 'r:' .. room .. ':held' end
-- The other side of delayed_added: a job of the lane left `delayed`.
local function delayed_removed(lane)
  if redis.call('HINCRBY', LDELAYED, lane, -1) <= 0 then redis.call('HDEL', LDELAYED, lane) end
end
-- The server's clock in ms (leases, retries and retention run on Redis's time, not a client's).
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- Put a job back into its lane at its original seq (reap, promote).
-- Put job `id` into `lane`'s pending zset at `seq` (enqueue, requeue, reassign): the books
-- (an older job than the head, a requeued one, becomes the head: ZADD LT), then the rings.
-- `n` jobs of `room` entered (n > 0) or left (n < 0) a pending zset: the operators' books
-- (stats, rooms; lanes.md "What operators read") `npending` (all pending jobs; absent at 0)
-- and `rdepth` (room -> its pending jobs, rooms with none absent), kept wherever jobs move
-- so that reading them never walks the rooms (`lhead`, the lanes' heads: head_changed, pend).
local function pending_changed(room, n)
  if redis.call('INCRBY', NPENDING, n) <= 0 then redis.call('DEL', NPENDING) end
  if tonumber(redis.call('ZINCRBY', RDEPTH, n, room)) <= 0 then
    redis.call('ZREM', RDEPTH, room)
  end
end
-- A job was just ZADDed to `lane`'s pending zset (which now holds `depth` jobs). If the
-- lane was empty it became serviceable, and if it was the room's first serviceable lane,
-- the room may have become serviceable too; a paused lane is held off the ring instead
-- (the room's held set lists it, so a snapshot finds every lane with work cheaply).
-- Whether a room or a lane is paused (both are members of the `paused` set).
local function is_paused(x) return redis.call('SISMEMBER', PAUSED, x) == 1 end
-- A room is open: not paused and below its ceiling (its lane ring is not looked at).
local function room_open(room)
  if is_paused(room) then return false end
  local lim = redis.call('HGET', GLIMIT, room)
  if lim then
    local act = tonumber(redis.call('HGET', GACTIVE, room) or '0')
    if act >= tonumber(lim) then return false end
  end
  return true
end
-- Put a room on the room ring after a false -> true transition, with a wake.
-- One wake token for a parked consumer (the list is capped at 64: tokens need not add up).
local function wake()
  redis.call('LPUSH', WAKE, '1')
  redis.call('LTRIM', WAKE, 0, 63)
end
local function ring_room(room)
  redis.call('RPUSH', RING, room)
  wake()
end
local function lane_filled(room, lane, depth)
  if depth == 1 then
    if is_paused(lane) then
      redis.call('SADD', room_held_key(room), lane)
    elseif redis.call('RPUSH', lane_ring_key(room), lane) == 1 and room_open(room) then
      ring_room(room)
    end
  end
end
local function pend(room, lane, id, seq)
  local pk = pending_key(lane)
  redis.call('ZADD', pk, seq, id)
  pending_changed(room, 1)
  redis.call('ZADD', LHEAD, 'LT', seq, lane)
  lane_filled(room, lane, redis.call('ZCARD', pk))
end
local function put_back(id, jk, room, lane, seq)
  redis.call('HSET', jk, 'state', 'pending')
  pend(room, lane, id, seq)
end
local ids = redis.call('ZRANGEBYSCORE', DELAYED, '-inf', now_ms(), 'LIMIT', 0,
  tonumber(ARGV[1]))
local n = 0
for _, id in ipairs(ids) do
  redis.call('ZREM', DELAYED, id)
  local jk = job_key(id)
  local f = redis.call('HMGET', jk, 'room', 'lane', 'seq')
  if f[1] then
    delayed_removed(f[2])
    put_back(id, jk, f[1], f[2], f[3])
    n = n + 1
  end
end
return n
