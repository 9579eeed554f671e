-- The lease of a job still held by `token`: the job key and its room, or nil when the
-- token is stale (the job was reaped, re-claimed, retried, acked or never existed).
--- @include "job_get"
local function holder(id, token)
  local jk = job_key(id)
  local f = job_get(jk, 't', 'a', 'r')
  if f[1] ~= 'active' or f[2] ~= token then return nil, nil end
  return jk, f[3]
end
