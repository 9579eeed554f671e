-- OLDER VERSION, a test fixture: the lanes' `enqueue` script exactly as Codemojex at
-- commit 70076ac built it (codemojex/lanes/scripts.py `source`), the last version that
-- wrote and read the job hash under its long field names (payload, attempts, state, ...;
-- the short names came with 8598b25). What a bot of that version runs: kept to test
-- a mixed pool of older and newer workers on one queue (tests/lanes/test_rolling_deploy.py).
-- Never edit it to fit the current code: it stands for code already deployed.
-- enqueue: admit a job into its lane; ring the lane / room on a false -> true transition.
-- A lane the lanes do not know (new, or forgotten by retain) is bound to the room; the
-- lane's entry in `lseen` and the room's in `rseen` become now (their last enqueue).
--
-- KEYS[1]  the queue prefix `emq:{q}:`
-- KEYS[2]  `emq:{q}:seq`, declared so a Redis Cluster refuses the script mid-migration (facade.py)
-- ARGV[1]  room id          ARGV[2]  lane id         ARGV[3]  job id
-- ARGV[4]  payload          ARGV[5]  max_attempts    ARGV[6]  max_depth (0 = none)
-- ARGV[7]  dedupe digest ('' = none)                 ARGV[8]  dedupe window in ms
-- Returns  {job id, 1} when admitted; {first job id, 0} for a dedupe hit or a job id that
--          already exists in that lane.
-- Errors   LANEERR (the lane is bound to another room, the job id is taken elsewhere),
--          LANEFULL (the lane holds max_depth pending jobs). Nothing is written then.
local P = KEYS[1]
local SEQ = P .. 'seq'
local LROOM = P .. 'lroom'
local RING = P .. 'ring'
local GLIMIT = P .. 'glimit'
local GACTIVE = P .. 'gactive'
local PAUSED = P .. 'paused'
local WAKE = P .. 'wake'
local LSEEN = P .. 'lseen'
local NPENDING = P .. 'npending'
local RDEPTH = P .. 'rdepth'
local LHEAD = P .. 'lhead'
local RSEEN = P .. 'rseen'
local function job_key(id) return P .. 'job:' .. id end
local function pending_key(lane) return P .. 'g:' .. lane .. ':pending' end
local function lane_ring_key(room) return P .. 'r:' .. room .. ':ring' end
local function room_lanes_key(room) return P .. 'r:' .. room .. ':lanes' end
local function room_held_key(room) return P .. 'r:' .. room .. ':held' end
local function dedupe_key(digest) return P .. 'dd:' .. digest end
-- Admit job `id` into `lane` of `room` (enqueue, admit). Returns 'ok', id when admitted;
-- 'dup', the first job's id for a dedupe hit or a job id that already exists in that lane;
-- 'full', why, when the lane holds max_depth (> 0) pending jobs; 'err', why, when the lane is
-- bound to another room or the job id is taken elsewhere. Nothing is written unless admitted.
-- Bind a lane to its room for as long as the lanes remember it (enqueue, reassign).
local function bind(room, lane)
  redis.call('HSET', LROOM, lane, room)
  redis.call('SADD', room_lanes_key(room), lane)
end
-- The server's clock in ms (leases, retries and retention run on Redis's time, not a client's).
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
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
local status, value = admit_job(ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5],
  tonumber(ARGV[6]), ARGV[7], ARGV[8])
if status == 'ok' then return {value, 1} end
if status == 'dup' then return {value, 0} end
if status == 'full' then return redis.error_reply('LANEFULL ' .. value) end
return redis.error_reply('LANEERR ' .. value)
