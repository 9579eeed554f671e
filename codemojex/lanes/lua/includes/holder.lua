-- The lease of a job still held by `token`: the job key, its room and whether the hash is of
-- the older layout (job_get), or nil when the token is stale (the job was reaped, re-claimed,
-- retried, acked or never existed).
--- @include "keys"
--- @include "job_get"
local function holder(id, token)
  local jk = job_key(id)
  local f, old = job_get(jk, 't', 'a', 'r')
  if f[1] ~= 'active' or f[2] ~= token then return nil, nil, nil end
  return jk, f[3], old
end
