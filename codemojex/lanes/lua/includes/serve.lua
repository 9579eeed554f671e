-- One rota step, then serve up to `k` heads (claim: 1; wclaim: the lane's weight), the K
-- clamped by the lane's depth (ZPOPMIN) and the room's ceiling headroom. Returns
-- {room, lane, ring length after (0 for a plain claim), then per job: id, payload, attempts,
-- max_attempts, seq, enqueued_ms} or {} when the queue is paused or nothing is serviceable.
--- @include "keys"
--- @include "now_ms"
--- @include "pending_changed"
--- @include "head_changed"
--- @include "job_get"
--- @include "job_set"
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
    local f, old = job_get(jk, 'p', 'a', 'm', 'e')
    if f[1] then
      local att = tonumber(f[2] or '0') + 1
      job_set(jk, old, 'a', att, 't', 'active')
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
