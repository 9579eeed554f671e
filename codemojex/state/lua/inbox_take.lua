-- inbox_take: take over the parked updates of holders that are gone (a process that died, or
-- stopped, or a poller fenced out by the caller's higher fence), whole keys in order: a key
-- whose oldest parked update a live process holds is left to it.
--
-- KEYS[1]  the prefix `cmx:{q}:` (names no key: a key's and a holder's sets, inbox_park)
-- KEYS[2]  the parked updates (`cmx:{q}:inbox:parked`)
-- KEYS[3]  where each is (`cmx:{q}:inbox:where`: update id -> "<holder> <key>")
-- KEYS[4]  the holders' leases (`cmx:{q}:inbox:holders`)
-- KEYS[5]  the pollers' fences (`cmx:{q}:inbox:fences`)
-- ARGV[1]  the caller (its holder name)    ARGV[2] its lease, ms
-- ARGV[3]  at most this many    ARGV[4] the caller's poller fence (0: not a poller)
-- Returns  {update id, record, ...}: the updates now the caller's, each key's oldest first
--- @include "keys"
--- @include "now_ms"
--- @include "inbox_dead_holder"
--- @include "inbox_run"
local me, fence, now = ARGV[1], tonumber(ARGV[4]), now_ms()
redis.call('ZADD', KEYS[4], now + tonumber(ARGV[2]), me)
if fence > 0 then redis.call('HSET', KEYS[5], me, fence) end
local gone = inbox_dead_holder(KEYS[4], KEYS[5], me, fence, now)
local out, room = {}, tonumber(ARGV[3])
local holders = redis.call('ZRANGE', KEYS[4], 0, -1)
holders[#holders + 1] = '-'
for _, holder in ipairs(holders) do
  if gone(holder) then
    for _, id in ipairs(redis.call('ZRANGE', inbox_held_key(holder), 0, -1)) do
      if room <= 0 then break end
      local at = redis.call('HGET', KEYS[3], id)
      if at and string.match(at, '^(%S+) ') == holder then
        room = room - inbox_run(KEYS[2], KEYS[3], string.match(at, ' (.+)$'), me, gone, room, out)
      end
    end
    if holder ~= '-' and redis.call('EXISTS', inbox_held_key(holder)) == 0 then
      redis.call('ZREM', KEYS[4], holder)
      redis.call('HDEL', KEYS[5], holder)
    end
  end
end
return out
