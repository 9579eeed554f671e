-- _common.lua: prepended to every verb script when it is loaded (not a verb itself).
--
-- Every script gets KEYS[1] = the queue prefix `emq:{q}:` (the hash tag pins all keys of
-- the queue to one Cluster slot); the keys of a room or lane found on a ring inside the
-- script cannot be declared beforehand, so they are derived here with the suffixes of
-- codemojex/lanes/keys.py. KEYS[2] is `emq:{q}:seq`, declared for Redis Cluster's sake only
-- (the prefix names no key: with a second declared key, a script is refused with TRYAGAIN
-- while the queue's slot migrates, instead of running on a half-filled importing node).
--
-- The invariants of lanes.md hold before every script, so ring membership follows from
-- the state: a room/lane is on its ring iff it is serviceable. The helpers below compare
-- the state around a change and push on a false -> true transition, never scanning a ring.
local P = KEYS[1]
local RING = P .. 'ring'
local ACTIVE = P .. 'active'
local GACTIVE = P .. 'gactive'
local GLIMIT = P .. 'glimit'
local PAUSED = P .. 'paused'
local LROOM = P .. 'lroom'
local GWEIGHT = P .. 'gweight'
local SEQ = P .. 'seq'
local QPAUSED = P .. 'qpaused'
local DELAYED = P .. 'delayed'
local DEAD = P .. 'dead'
local WAKE = P .. 'wake'
local LSEEN = P .. 'lseen'
local LDELAYED = P .. 'ldelayed'
local RDEPTH = P .. 'rdepth'
local LHEAD = P .. 'lhead'
local NPENDING = P .. 'npending'
local RSEEN = P .. 'rseen'

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function job_key(id) return P .. 'job:' .. id end
local function pending_key(lane) return P .. 'g:' .. lane .. ':pending' end
local function lane_ring_key(room) return P .. 'r:' .. room .. ':ring' end
local function room_lanes_key(room) return P .. 'r:' .. room .. ':lanes' end
local function room_held_key(room) return P .. 'r:' .. room .. ':held' end
local function dedupe_key(digest) return P .. 'dd:' .. digest end

local function wake()
  redis.call('LPUSH', WAKE, '1')
  redis.call('LTRIM', WAKE, 0, 63)
end

local function is_paused(x) return redis.call('SISMEMBER', PAUSED, x) == 1 end

-- not paused and below its ceiling (the lane ring is not looked at)
local function room_open(room)
  if is_paused(room) then return false end
  local lim = redis.call('HGET', GLIMIT, room)
  if lim then
    local act = tonumber(redis.call('HGET', GACTIVE, room) or '0')
    if act >= tonumber(lim) then return false end
  end
  return true
end

local function room_serviceable(room)
  return room_open(room) and redis.call('LLEN', lane_ring_key(room)) > 0
end

-- Put a room on the room ring after a false -> true transition, with a wake.
local function ring_room(room)
  redis.call('RPUSH', RING, room)
  wake()
end

-- The operators' books (stats, rooms; lanes.md "What operators read"), kept wherever jobs
-- enter or leave a pending zset, so that reading them never walks the rooms: `npending` (all
-- pending jobs; absent at 0), `rdepth` (room -> its pending jobs, rooms with none absent)
-- and `lhead` (lane -> the seq of its head, i.e. its oldest pending job). O(log n) each.
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

-- A job was just ZADDed to `lane`'s pending zset (which now holds `depth` jobs). If the
-- lane was empty it became serviceable, and if it was the room's first serviceable lane,
-- the room may have become serviceable too; a paused lane is held off the ring instead
-- (the room's held set lists it, so a snapshot finds every lane with work cheaply).
local function lane_filled(room, lane, depth)
  if depth == 1 then
    if is_paused(lane) then
      redis.call('SADD', room_held_key(room), lane)
    elseif redis.call('RPUSH', lane_ring_key(room), lane) == 1 and room_open(room) then
      ring_room(room)
    end
  end
end

-- A lane that holds work and is not paused joins its room's lane ring (resume).
local function lane_join(room, lane)
  if redis.call('RPUSH', lane_ring_key(room), lane) == 1 and room_open(room) then
    ring_room(room)
  end
end

-- Put job `id` into `lane`'s pending zset at `seq` (enqueue, requeue, reassign): the books
-- (an older job than the head, a requeued one, becomes the head: ZADD LT), then the rings.
local function pend(room, lane, id, seq)
  local pk = pending_key(lane)
  redis.call('ZADD', pk, seq, id)
  pending_changed(room, 1)
  redis.call('ZADD', LHEAD, 'LT', seq, lane)
  lane_filled(room, lane, redis.call('ZCARD', pk))
end

-- Bind a lane to its room for as long as the lanes remember it (enqueue, reassign).
local function bind(room, lane)
  redis.call('HSET', LROOM, lane, room)
  redis.call('SADD', room_lanes_key(room), lane)
end

-- Admit job `id` into `lane` of `room` (enqueue, admit). Returns 'ok', id when admitted;
-- 'dup', the first job's id for a dedupe hit or a job id that already exists in that lane;
-- 'full', why, when the lane holds max_depth (> 0) pending jobs; 'err', why, when the lane is
-- bound to another room or the job id is taken elsewhere. Nothing is written unless admitted.
local function admit_job(room, lane, id, payload, max_attempts, max_depth, digest, window)
  local ddk = nil
  if digest ~= '' then
    ddk = dedupe_key(digest)
    local first = redis.call('GET', ddk)
    if first then return 'dup', first end
  end
  local bound = redis.call('HGET', LROOM, lane)
  if bound and bound ~= room then
    return 'err', 'lane ' .. lane .. ' belongs to room ' .. bound .. ', not to room ' .. room
  end
  local jk = job_key(id)
  local have = redis.call('HGET', jk, 'lane')
  if have then
    if have ~= lane then return 'err', 'job ' .. id .. ' already exists in lane ' .. have end
    return 'dup', id
  end
  local pk = pending_key(lane)
  if max_depth > 0 then
    local depth = redis.call('ZCARD', pk)
    if depth >= max_depth then
      return 'full', 'lane ' .. lane .. ' already holds ' .. depth ..
        ' pending jobs (max_depth ' .. max_depth .. ')'
    end
  end
  if not bound then bind(room, lane) end
  local now = now_ms()
  redis.call('ZADD', LSEEN, now, lane)
  local seq = redis.call('INCR', SEQ)
  redis.call('HSET', jk, 'payload', payload, 'room', room, 'lane', lane, 'seq', seq,
    'attempts', 0, 'max_attempts', max_attempts, 'state', 'pending', 'enqueued_ms', now)
  pend(room, lane, id, seq)
  redis.call('ZADD', RSEEN, now, room)
  if ddk then redis.call('SET', ddk, id, 'PX', window) end
  return 'ok', id
end

-- A lane's jobs waiting in `delayed` are counted, so retain can tell a lane with none.
local function delayed_added(lane) redis.call('HINCRBY', LDELAYED, lane, 1) end
local function delayed_removed(lane)
  if redis.call('HINCRBY', LDELAYED, lane, -1) <= 0 then redis.call('HDEL', LDELAYED, lane) end
end

-- Put a job back into its lane at its original seq (reap, promote).
local function requeue(id, jk, room, lane, seq)
  redis.call('HSET', jk, 'state', 'pending')
  pend(room, lane, id, seq)
end

-- `n` of `room`'s jobs left `active`: give back their permits. Only a room that was held
-- at its ceiling (gactive >= glimit before, below it now) can become serviceable here.
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

-- Admin verbs only (they may scan a ring): re-establish the membership of `room` on the
-- room ring after a change, given whether it was serviceable (= on the ring) before.
local function room_recheck(room, before)
  local after = room_serviceable(room)
  if before and not after then
    redis.call('LREM', RING, 0, room)
  elseif after and not before then
    ring_room(room)
  end
end

-- Admin verbs only: `lane` (of `room`) stops being serviceable while it is on its ring.
local function lane_unring(room, lane)
  local rr = lane_ring_key(room)
  local before = room_serviceable(room)
  redis.call('LREM', rr, 0, lane)
  room_recheck(room, before)
end

-- Admin verbs only: `lane` (of `room`) has no pending job any more: off its ring, or out of
-- its room's held set when it is paused.
local function lane_emptied(room, lane)
  if is_paused(lane) then
    redis.call('SREM', room_held_key(room), lane)
  else
    lane_unring(room, lane)
  end
end

-- One rota step, then serve up to `k` heads (claim: 1; wclaim: the lane's weight), the K
-- clamped by the lane's depth (ZPOPMIN) and the room's ceiling headroom. Returns
-- {room, lane, ring length after (0 for a plain claim), then per job: id, payload, attempts,
-- max_attempts, seq, enqueued_ms} or {} when the queue is paused or nothing is serviceable.
local function serve(lease_ms, weighted)
  if redis.call('EXISTS', P .. 'qpaused') == 1 then return {} end
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
    k = tonumber(redis.call('HGET', P .. 'gweight', lane) or '1')
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

-- Complete the leased jobs given as (id, token) pairs in ARGV[first], ARGV[first + 1], ...;
-- stale tokens are skipped. The permits are given back per room, rooms in the order they
-- first appear. Returns how many were acked (ack_many, ack_wclaim, ack_wclaims).
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
