-- inbox_park: keep updates the bot has taken but not finished, so that it may confirm them to
-- Telegram (bot/clock.py: an update past its deadline, or one waiting out an outage). Each is
-- held by the process that parked it, whose one lease (renewed by inbox_renew) covers all it
-- holds; a process that died leaves them to another (inbox_take). Each is filed under its
-- order key, by update id, so that whoever takes a key takes its updates in order.
--
-- KEYS[1]  the prefix `cmx:{q}:` (names no key): a key's and a holder's sets are built on it
--          (`inbox:key:<key>`, `inbox:held:<holder>`, zsets: update id -> update id)
-- KEYS[2]  the parked updates (`cmx:{q}:inbox:parked`, hash: update id -> record)
-- KEYS[3]  where each is (`cmx:{q}:inbox:where`, hash: update id -> "<holder> <key>")
-- KEYS[4]  the holders' leases (`cmx:{q}:inbox:holders`, zset: holder -> lease's end, ms)
-- ARGV[1]  the caller (its holder name)    ARGV[2] its lease, ms
-- ARGV[3..] triples: update id, order key, record (the update's JSON and its tries so far)
-- Returns  how many were parked
--- @include "keys"
--- @include "now_ms"
local me = ARGV[1]
redis.call('ZADD', KEYS[4], now_ms() + tonumber(ARGV[2]), me)
local parked = 0
for i = 3, #ARGV, 3 do
  local id, key = ARGV[i], ARGV[i + 1]
  local was = redis.call('HGET', KEYS[3], id)
  if was then redis.call('ZREM', inbox_held_key(string.match(was, '^(%S+) ')), id) end
  redis.call('HSET', KEYS[2], id, ARGV[i + 2])
  redis.call('HSET', KEYS[3], id, me .. ' ' .. key)
  redis.call('ZADD', inbox_key_key(key), id, id)
  redis.call('ZADD', inbox_held_key(me), id, id)
  parked = parked + 1
end
return parked
