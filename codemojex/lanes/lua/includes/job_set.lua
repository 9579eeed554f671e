-- HSET of a job hash's fields, given as short names and values, in the layout the hash is in
-- (`old`, as job_get read it): a job of the older layout keeps it, so that an older worker
-- reads what a newer one wrote (lanes.md, "The job hash").
--- @include "job_long"
local function job_set(jk, old, ...)
  if not old then return redis.call('HSET', jk, ...) end
  local kv = {...}
  for i = 1, #kv, 2 do kv[i] = job_long(kv[i]) end
  return redis.call('HSET', jk, unpack(kv))
end
