-- inbox_renew: the process holding parked updates is alive: its one lease starts again (a
-- lease of 0: it stops and hands on what it holds, which another process may take now).
--
-- KEYS[1]  the prefix `cmx:{q}:` (names no key: a holder's set, inbox_park)
-- KEYS[2]  the holders' leases (`cmx:{q}:inbox:holders`)
-- ARGV[1]  the caller (its holder name)    ARGV[2] the lease, ms
-- Returns  how many parked updates the caller holds (fewer than it thinks: another process
--          took some over while its lease had run out)
--- @include "keys"
--- @include "now_ms"
local held = redis.call('ZCARD', inbox_held_key(ARGV[1]))
local lease = tonumber(ARGV[2])
if lease > 0 then
  redis.call('ZADD', KEYS[2], now_ms() + lease, ARGV[1])
elseif held > 0 then
  redis.call('ZADD', KEYS[2], 0, ARGV[1])
else
  redis.call('ZREM', KEYS[2], ARGV[1])
end
return held
