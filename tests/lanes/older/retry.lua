-- OLDER VERSION, a test fixture: the lanes' `retry` script exactly as Codemojex at
-- commit 70076ac built it (codemojex/lanes/scripts.py `source`), the last version that
-- wrote and read the job hash under its long field names (payload, attempts, state, ...;
-- the short names came with 8598b25). What a worker of that version runs: kept to test
-- a mixed pool of older and newer workers on one queue (tests/lanes/test_rolling_deploy.py).
-- Never edit it to fit the current code: it stands for code already deployed.
-- retry: a typed retry of a leased job: to `delayed` while attempts remain, else `dead`.
-- Frees the permit like ack. A stale token is refused and changes nothing.
--
-- KEYS[1]  the queue prefix `emq:{q}:`
-- KEYS[2]  `emq:{q}:seq`, declared so a Redis Cluster refuses the script mid-migration (facade.py)
-- ARGV[1]  job id      ARGV[2]  attempts (token)      ARGV[3]  delay in ms
-- ARGV[4]  error text (stored as last_error)
-- Returns  'delayed', 'dead' or 'stale'
local P = KEYS[1]
local RING = P .. 'ring'
local GLIMIT = P .. 'glimit'
local GACTIVE = P .. 'gactive'
local PAUSED = P .. 'paused'
local ACTIVE = P .. 'active'
local DELAYED = P .. 'delayed'
local DEAD = P .. 'dead'
local WAKE = P .. 'wake'
local LDELAYED = P .. 'ldelayed'
local function job_key(id) return P .. 'job:' .. id end
local function lane_ring_key(room) return P .. 'r:' .. room .. ':ring' end
-- A lane's jobs waiting in `delayed` are counted, so retain can tell a lane with none.
local function delayed_added(lane) redis.call('HINCRBY', LDELAYED, lane, 1) end
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
-- `n` of `room`'s jobs left `active`: give back their permits. Only a room that was held
-- at its ceiling (gactive >= glimit before, below it now) can become serviceable here.
-- Whether a room or a lane is paused (both are members of the `paused` set).
local function is_paused(x) return redis.call('SISMEMBER', PAUSED, x) == 1 end
-- Put a room on the room ring after a false -> true transition, with a wake.
-- One wake token for a parked consumer (the list is capped at 64: tokens need not add up).
local function wake()
  redis.call('LPUSH', WAKE, '1')
  redis.call('LTRIM', WAKE, 0, 63)
end
local function ring_room(room)
  redis.call('RPUSH', RING, room)
  wake()
end
local function permit_freed(room, n)
  local act = redis.call('HINCRBY', GACTIVE, room, -n)
  if act <= 0 then redis.call('HDEL', GACTIVE, room) end
  local lim = redis.call('HGET', GLIMIT, room)
  if lim then
    lim = tonumber(lim)
    if act < lim and act + n >= lim and not is_paused(room)
        and redis.call('LLEN', lane_ring_key(room)) > 0 then
      ring_room(room)
    end
  end
end
local id = ARGV[1]
local jk, room = holder(id, ARGV[2])
if not jk then return 'stale' end
redis.call('ZREM', ACTIVE, id)
local f = redis.call('HMGET', jk, 'attempts', 'max_attempts', 'lane')
local now = now_ms()
local outcome
if tonumber(f[1]) >= tonumber(f[2]) then
  redis.call('ZADD', DEAD, now, id)
  outcome = 'dead'
else
  redis.call('ZADD', DELAYED, now + tonumber(ARGV[3]), id)
  delayed_added(f[3])
  outcome = 'delayed'
end
redis.call('HSET', jk, 'state', outcome, 'last_error', ARGV[4])
permit_freed(room, 1)
return outcome
