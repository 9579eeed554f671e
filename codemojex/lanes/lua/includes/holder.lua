-- The lease of a job still held by `token`: the job key and its room, or nil when the
-- token is stale (the job was reaped, re-claimed, retried, acked or never existed).
local function holder(id, token)
  local jk = job_key(id)
  local f = redis.call('HMGET', jk, 'state', 'attempts', 'room')
  if f[1] ~= 'active' or f[2] ~= token then return nil, nil end
  return jk, f[3]
end
