-- HMGET of a job hash's fields by their short names (lanes.md, "The job hash"), read in the
-- layout the hash is in, and never rewritten: a job of the older layout (its fields under
-- long names, written by an older version) is read under those, so that an older worker
-- serving the same queue during a rolling deploy still finds every field where it looks
-- (only `repair` upgrades a job). The first field asked for must be one every job has (p, r,
-- l, s, t, e, m: not a, absent until the first lease, nor x). Returns the values (nils for a
-- missing hash) and whether the hash is of the older layout, in which a script that writes
-- to the job writes (`job_set`). A job of the current layout costs the one HMGET.
--- @include "job_long"
local function job_get(jk, ...)
  local f = redis.call('HMGET', jk, ...)
  if f[1] then return f, false end
  local names = {...}
  for i = 1, #names do names[i] = job_long(names[i]) end
  local g = redis.call('HMGET', jk, unpack(names))
  if g[1] then return g, true end
  return f, false
end
