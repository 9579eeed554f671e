-- inbox_renew: the process working on these parked updates is alive: extend their leases
-- (a lease of 0: it hands them on, stopping, and another process may take them over now).
-- An update no longer parked (settled, or taken over after a lease ran out) is left alone.
--
-- KEYS[1]  the leases (`cmx:{q}:inbox:lease`)
-- ARGV[1]  the lease, ms    ARGV[2..] the update ids
-- Returns  how many leases were extended
--- @include "now_ms"
local until_ms = now_ms() + tonumber(ARGV[1])
local renewed = 0
for i = 2, #ARGV do
  renewed = renewed + redis.call('ZADD', KEYS[1], 'XX', 'CH', until_ms, ARGV[i])
end
return renewed
