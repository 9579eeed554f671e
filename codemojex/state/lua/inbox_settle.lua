-- inbox_settle: parked updates are finished (handled, or dead-lettered): forget them.
--
-- KEYS[1]  the parked updates (`cmx:{q}:inbox:parked`)
-- KEYS[2]  their leases (`cmx:{q}:inbox:lease`)
-- ARGV[1]  an update id, and so on: the update ids
-- Returns  how many were still parked
local gone = 0
for i = 1, #ARGV do
  gone = gone + redis.call('HDEL', KEYS[1], ARGV[i])
  redis.call('ZREM', KEYS[2], ARGV[i])
end
return gone
