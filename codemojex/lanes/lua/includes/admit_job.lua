-- Admit job `id` into `lane` of `room` (enqueue, admit). Returns 'ok', id when admitted;
-- 'dup', the first job's id for a dedupe hit or a job id that already exists in that lane;
-- 'full', why, when the lane holds max_depth (> 0) pending jobs; 'err', why, when the lane is
-- bound to another room or the job id is taken elsewhere. Nothing is written unless admitted.
-- `known`: the caller already looked the dedupe key and the job id up (admit does, before its
-- guards), so they are not read twice.
--
-- The job hash (lanes.md, "The job hash"): p payload, r room, l lane, s seq, m max_attempts,
-- t state, e enqueued_ms; a (attempts) is written by the first lease (absent = 0) and x (the
-- last error) by a retry or a death. Short names and no attempts field keep a guess's hash
-- in one small listpack allocation (about 250 bytes in all instead of 310).
--- @include "keys"
--- @include "bind"
--- @include "job_lane"
--- @include "now_ms"
--- @include "pend"
local function admit_job(room, lane, id, payload, max_attempts, max_depth, digest, window, known)
  local ddk = nil
  if digest ~= '' then ddk = dedupe_key(digest) end
  if not known then
    if ddk then
      local first = redis.call('GET', ddk)
      if first then return 'dup', first end
    end
    local have = job_lane(id)
    if have then
      if have ~= lane then return 'err', 'job ' .. id .. ' already exists in lane ' .. have end
      return 'dup', id
    end
  end
  local bound = redis.call('HGET', LROOM, lane)
  if bound and bound ~= room then
    return 'err', 'lane ' .. lane .. ' belongs to room ' .. bound .. ', not to room ' .. room
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
  redis.call('HSET', job_key(id), 'p', payload, 'r', room, 'l', lane, 's', seq,
    'm', max_attempts, 't', 'pending', 'e', now)
  pend(room, lane, id, seq)
  redis.call('ZADD', RSEEN, now, room)
  if ddk then redis.call('SET', ddk, id, 'PX', window) end
  return 'ok', id
end
