-- OLDER VERSION, a test fixture: the lanes' `extend` script exactly as Codemojex at
-- commit 70076ac built it (codemojex/lanes/scripts.py `source`), the last version that
-- wrote and read the job hash under its long field names (payload, attempts, state, ...;
-- the short names came with 8598b25). What a worker of that version runs: kept to test
-- a mixed pool of older and newer workers on one queue (tests/lanes/test_rolling_deploy.py).
-- Never edit it to fit the current code: it stands for code already deployed.
-- extend: move a lease's deadline to server TIME + lease (a heartbeat for long work).
--
-- KEYS[1]  the queue prefix `emq:{q}:`
-- KEYS[2]  `emq:{q}:seq`, declared so a Redis Cluster refuses the script mid-migration (facade.py)
-- ARGV[1]  job id      ARGV[2]  attempts (token)      ARGV[3]  lease in ms
-- Returns  1 when extended, 0 when the token is stale
local P = KEYS[1]
local ACTIVE = P .. 'active'
local function job_key(id) return P .. 'job:' .. id end
-- The lease of a job still held by `token`: the job key and its room, or nil when the
-- token is stale (the job was reaped, re-claimed, retried, acked or never existed).
local function holder(id, token)
  local jk = job_key(id)
  local f = redis.call('HMGET', jk, 'state', 'attempts', 'room')
  if f[1] ~= 'active' or f[2] ~= token then return nil, nil end
  return jk, f[3]
end
-- The server's clock in ms (leases, retries and retention run on Redis's time, not a client's).
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local jk = holder(ARGV[1], ARGV[2])
if not jk then return 0 end
redis.call('ZADD', ACTIVE, 'XX', now_ms() + tonumber(ARGV[3]), ARGV[1])
return 1
