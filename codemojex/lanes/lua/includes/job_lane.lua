-- The lane of job `id` when its hash exists (of either layout: a job admitted by an older
-- version answers a dedupe too), else nil: one read whether or not it exists (admit asks
-- whether it exists; enqueue, whether in the lane it names).
--- @include "keys"
local function job_lane(id)
  local f = redis.call('HMGET', job_key(id), 'l', 'lane')
  return f[1] or f[2] or nil
end
