-- OLDER VERSION, a test fixture: the lanes' `ack_wclaims` script exactly as Codemojex at
-- commit 70076ac built it (codemojex/lanes/scripts.py `source`), the last version that
-- wrote and read the job hash under its long field names (payload, attempts, state, ...;
-- the short names came with 8598b25). What a worker of that version runs: kept to test
-- a mixed pool of older and newer workers on one queue (tests/lanes/test_rolling_deploy.py).
-- Never edit it to fit the current code: it stands for code already deployed.
-- ack_wclaims: a consumer pool's round in one script call: ack_many of every batch its
-- consumers have finished, then up to N wclaims, one per consumer asking for work. N
-- claims here are N rota steps, exactly as N ack_wclaim calls one after another would be;
-- the pool pays one round trip for all of them instead of one per consumer.
-- Claiming stops at the first empty serve (the queue is paused or nothing is serviceable:
-- a further serve would find nothing either).
--
-- KEYS[1]  the queue prefix `emq:{q}:`
-- KEYS[2]  `emq:{q}:seq`, declared so a Redis Cluster refuses the script mid-migration (facade.py)
-- ARGV[1]  lease in ms      ARGV[2]  N, the batches wanted (>= 0)
-- ARGV[3..]  job id, attempts, job id, attempts, ... (may be none)
-- Returns  {acked, ring length after the last serve (0 when none served), then per batch:
--          F (its fields: 6 per job), room, lane, then F fields: id, payload, attempts,
--          max_attempts, seq, enqueued_ms per job}
local P = KEYS[1]
local RING = P .. 'ring'
local GLIMIT = P .. 'glimit'
local GACTIVE = P .. 'gactive'
local GWEIGHT = P .. 'gweight'
local PAUSED = P .. 'paused'
local QPAUSED = P .. 'qpaused'
local ACTIVE = P .. 'active'
local WAKE = P .. 'wake'
local NPENDING = P .. 'npending'
local RDEPTH = P .. 'rdepth'
local LHEAD = P .. 'lhead'
local function job_key(id) return P .. 'job:' .. id end
local function pending_key(lane) return P .. 'g:' .. lane .. ':pending' end
local function lane_ring_key(room) return P .. 'r:' .. room .. ':ring' end
-- Complete the leased jobs given as (id, token) pairs in ARGV[first], ARGV[first + 1], ...;
-- stale tokens are skipped. The permits are given back per room, rooms in the order they
-- first appear. Returns how many were acked (ack_many, ack_wclaim, ack_wclaims).
-- `n` of `room`'s jobs left `active`: give back their permits. Only a room that was held
-- at its ceiling (gactive >= glimit before, below it now) can become serviceable here.
-- Whether a room or a lane is paused (both are members of the `paused` set).
local function is_paused(x) return redis.call('SISMEMBER', PAUSED, x) == 1 end
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
local function permit_freed(room, n)
  local act = redis.call('HINCRBY', GACTIVE, room, -n)
  if act <= 0 then redis.call('HDEL', GACTIVE, room) end
  local lim = redis.call('HGET', GLIMIT, room)
  if lim then
    lim = tonumber(lim)
    if act < lim and act + n >= lim and not is_paused(room)
        and redis.call('LLEN', lane_ring_key(room)) > 0 then
      ring_room(room)
    end
  end
end
-- The lease of a job still held by `token`: the job key and its room, or nil when the
-- token is stale (the job was reaped, re-claimed, retried, acked or never existed).
local function holder(id, token)
  local jk = job_key(id)
  local f = redis.call('HMGET', jk, 'state', 'attempts', 'room')
  if f[1] ~= 'active' or f[2] ~= token then return nil, nil end
  return jk, f[3]
end
local function ack_pairs(first)
  local ids, jks, seen = {}, {}, {}
  local freed, rooms = {}, {}
  for i = first, #ARGV, 2 do
    local id = ARGV[i]
    if not seen[id] then
      -- Only an acked id is marked: the same id may come first with a stale token and
      -- then with the live one (a lease that ran out and was claimed again).
      local jk, room = holder(id, ARGV[i + 1])
      if jk then
        seen[id] = true
        ids[#ids + 1] = id
        jks[#jks + 1] = jk
        if not freed[room] then
          freed[room] = 0
          rooms[#rooms + 1] = room
        end
        freed[room] = freed[room] + 1
      end
    end
  end
  if #ids == 0 then return 0 end
  redis.call('ZREM', ACTIVE, unpack(ids))
  redis.call('DEL', unpack(jks))
  for _, room in ipairs(rooms) do permit_freed(room, freed[room]) end
  return #ids
end
-- One rota step, then serve up to `k` heads (claim: 1; wclaim: the lane's weight), the K
-- clamped by the lane's depth (ZPOPMIN) and the room's ceiling headroom. Returns
-- {room, lane, ring length after (0 for a plain claim), then per job: id, payload, attempts,
-- max_attempts, seq, enqueued_ms} or {} when the queue is paused or nothing is serviceable.
-- The server's clock in ms (leases, retries and retention run on Redis's time, not a client's).
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
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
-- `lane` lost its head (claimed, moved): read the new one. Returns whether it has one.
local function head_changed(lane)
  local pk = pending_key(lane)
  local head = redis.call('ZRANGE', pk, 0, 0, 'WITHSCORES')
  if #head == 0 then
    redis.call('ZREM', LHEAD, lane)
    return false
  end
  redis.call('ZADD', LHEAD, head[2], lane)
  return true
end
local function serve(lease_ms, weighted)
  if redis.call('EXISTS', QPAUSED) == 1 then return {} end
  local room = redis.call('LMOVE', RING, RING, 'LEFT', 'RIGHT')
  if not room then return {} end
  local rr = lane_ring_key(room)
  local lane = redis.call('LMOVE', rr, rr, 'LEFT', 'RIGHT')
  if not lane then
    -- unreachable while invariant 2 holds; leave the ring sound anyway
    redis.call('LREM', RING, -1, room)
    return {}
  end
  local pk = pending_key(lane)
  local k = 1
  if weighted then
    k = tonumber(redis.call('HGET', GWEIGHT, lane) or '1')
    if k < 1 then k = 1 end
  end
  local lim = redis.call('HGET', GLIMIT, room)
  local act = 0
  if lim then
    lim = tonumber(lim)
    act = tonumber(redis.call('HGET', GACTIVE, room) or '0')
    if lim - act < k then k = lim - act end
  end
  local popped = {}
  if k >= 1 then popped = redis.call('ZPOPMIN', pk, k) end
  local deadline = now_ms() + tonumber(lease_ms)
  local out = {room, lane, 0}
  local leased = {}
  for i = 1, #popped, 2 do
    local id = popped[i]
    local jk = job_key(id)
    local f = redis.call('HMGET', jk, 'payload', 'attempts', 'max_attempts', 'enqueued_ms')
    if f[1] then
      local att = tonumber(f[2]) + 1
      redis.call('HSET', jk, 'attempts', att, 'state', 'active')
      leased[#leased + 1] = deadline
      leased[#leased + 1] = id
      out[#out + 1] = id
      out[#out + 1] = f[1]
      out[#out + 1] = att
      out[#out + 1] = tonumber(f[3])
      out[#out + 1] = tonumber(popped[i + 1])
      out[#out + 1] = tonumber(f[4])
    end
  end
  if #leased > 0 then
    redis.call('ZADD', ACTIVE, unpack(leased))
    act = redis.call('HINCRBY', GACTIVE, room, #leased / 2)
  end
  -- fewer heads than asked for means the lane is empty now, without asking it; otherwise
  -- reading its new head (for the books) tells
  local empty
  if #popped / 2 < k then
    empty = true
    redis.call('ZREM', LHEAD, lane)
  elseif #popped > 0 then
    empty = not head_changed(lane)
  else
    empty = redis.call('ZCARD', pk) == 0
  end
  if #popped > 0 then pending_changed(room, -#popped / 2) end
  -- Lane and room were just moved to the tails, so these LREMs stop at once: O(1). The
  -- room was on the ring, so it is not paused: it stays iff below its ceiling with a lane.
  local room_stays = not lim or act < lim
  if empty then
    redis.call('LREM', rr, -1, lane)
    if room_stays and redis.call('LLEN', rr) == 0 then room_stays = false end
  end
  if not room_stays then redis.call('LREM', RING, -1, room) end
  if #out == 3 then return {} end
  -- the consumers' wake hint; a plain claim is not used by the pool and skips it
  if weighted then out[3] = redis.call('LLEN', RING) end
  return out
end
local acked = ack_pairs(3)
local out = {acked, 0}
for _ = 1, tonumber(ARGV[2]) do
  local batch = serve(ARGV[1], true)
  if #batch == 0 then break end
  out[2] = batch[3]
  out[#out + 1] = #batch - 3
  out[#out + 1] = batch[1]
  out[#out + 1] = batch[2]
  for i = 4, #batch do out[#out + 1] = batch[i] end
end
return out
