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
--- @include "bind"
--- @include "now_ms"
--- @include "pend"
local room, lane, id = ARGV[1], ARGV[2], ARGV[3]
local ddk = nil
if ARGV[7] ~= '' then
  ddk = dedupe_key(ARGV[7])
  local first = redis.call('GET', ddk)
  if first then return {first, 0} end
end
local bound = redis.call('HGET', LROOM, lane)
if bound and bound ~= room then
  return redis.error_reply('LANEERR lane ' .. lane .. ' belongs to room ' .. bound ..
    ', not to room ' .. room)
end
local jk = job_key(id)
local have = redis.call('HGET', jk, 'lane')
if have then
  if have ~= lane then
    return redis.error_reply('LANEERR job ' .. id .. ' already exists in lane ' .. have)
  end
  return {id, 0}
end
local pk = pending_key(lane)
local max_depth = tonumber(ARGV[6])
if max_depth > 0 then
  local depth = redis.call('ZCARD', pk)
  if depth >= max_depth then
    return redis.error_reply('LANEFULL lane ' .. lane .. ' already holds ' .. depth ..
      ' pending jobs (max_depth ' .. max_depth .. ')')
  end
end
if not bound then bind(room, lane) end
local now = now_ms()
redis.call('ZADD', LSEEN, now, lane)
local seq = redis.call('INCR', SEQ)
redis.call('HSET', jk, 'payload', ARGV[4], 'room', room, 'lane', lane, 'seq', seq,
  'attempts', 0, 'max_attempts', ARGV[5], 'state', 'pending', 'enqueued_ms', now)
pend(room, lane, id, seq)
redis.call('ZADD', RSEEN, now, room)
if ddk then redis.call('SET', ddk, id, 'PX', ARGV[8]) end
return {id, 1}
