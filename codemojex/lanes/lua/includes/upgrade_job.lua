-- A job hash written by an older version (its fields under their long names: payload, room,
-- lane, seq, attempts, max_attempts, state, enqueued_ms, last_error) rewritten under the
-- short names (lanes.md, "The job hash"). Only `repair` calls it, with no older worker left:
-- an older worker reads the long names, and one that found a job rewritten would drop it.
-- A field already under its short name wins (a newer write). Returns whether `jk` was such a
-- hash (false for a missing key or one of the current layout).
local function upgrade_job(jk)
  local long = {'payload', 'room', 'lane', 'seq', 'attempts', 'max_attempts', 'state',
    'enqueued_ms', 'last_error'}
  local short = {'p', 'r', 'l', 's', 'a', 'm', 't', 'e', 'x'}
  local old = redis.call('HMGET', jk, unpack(long))
  local moved = false
  for i = 1, #long do
    if old[i] then
      redis.call('HSETNX', jk, short[i], old[i])
      moved = true
    end
  end
  if moved then redis.call('HDEL', jk, unpack(long)) end
  return moved
end
