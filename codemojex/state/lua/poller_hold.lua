-- poller_hold: take or keep the right to poll Telegram for this bot: one poller per token at a
-- time (two would take each other's updates away, and a new one would read the old one's
-- updates in hand as dead). Fenced: every new holder gets a higher number.
--
-- KEYS[1]  the poller's lease (`cmx:{q}:poller:<bot id>`: the holder's token)
-- KEYS[2]  its fence (`cmx:{q}:poller:<bot id>:fence`: the number of the last holder)
-- ARGV[1]  the caller's token    ARGV[2] the lease, ms
-- ARGV[3]  how long the fence outlives its last holder's taking the lease, s
-- Returns  the caller's fence number when it holds the lease (taken or renewed), 0 when
--          another process holds it
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return tonumber(redis.call('GET', KEYS[2]) or '0')
end
if holder then
  return 0
end
local fence = redis.call('INCR', KEYS[2])
redis.call('EXPIRE', KEYS[2], ARGV[3])
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return fence
