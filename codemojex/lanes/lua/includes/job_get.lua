-- HMGET of a job hash's fields by their short names (lanes.md, "The job hash"). The first
-- field asked for must be one every job has (p, r, l, s, t, e, m: not a, absent until the
-- first lease, nor x): when it is missing, the hash is either gone (the caller sees nils) or
-- of the older layout, which is upgraded in place and read again. A job of the current
-- layout costs the one HMGET.
--- @include "upgrade_job"
local function job_get(jk, ...)
  local f = redis.call('HMGET', jk, ...)
  if not f[1] and upgrade_job(jk) then f = redis.call('HMGET', jk, ...) end
  return f
end
