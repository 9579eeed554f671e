-- inbox_park: keep updates the bot has taken but not finished, so that it may confirm them to
-- Telegram (bot/processor.py: an update past its deadline, or one waiting out an outage).
-- Each is leased to the process that parked it, which renews the lease while it works on it;
-- one whose lease ran out (its process died) is taken over by another (inbox_take).
--
-- KEYS[1]  the parked updates (`cmx:{q}:inbox:parked`, hash: update id -> record)
-- KEYS[2]  their leases (`cmx:{q}:inbox:lease`, zset: update id -> lease's end, ms)
-- ARGV[1]  the lease, ms
-- ARGV[2..] pairs: update id, record (the update's JSON and its tries so far)
-- Returns  how many were parked
--- @include "now_ms"
local until_ms = now_ms() + tonumber(ARGV[1])
local parked = 0
for i = 2, #ARGV, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
  redis.call('ZADD', KEYS[2], until_ms, ARGV[i])
  parked = parked + 1
end
return parked
