-- inbox_settle: parked updates the caller holds are finished: forget them, and hand the
-- caller what waits behind them in their keys (what another process parked behind, what a
-- dead process held), in order, so that a key's next update runs next.
--
-- KEYS[1]  the prefix `cmx:{q}:` (names no key: a key's and a holder's sets, inbox_park)
-- KEYS[2]  the parked updates (`cmx:{q}:inbox:parked`)
-- KEYS[3]  where each is (`cmx:{q}:inbox:where`: update id -> "<holder> <key>")
-- KEYS[4]  the holders' leases (`cmx:{q}:inbox:holders`)
-- KEYS[5]  the pollers' fences (`cmx:{q}:inbox:fences`, hash: holder -> fence)
-- ARGV[1]  the caller (its holder name)    ARGV[2] at most this many handed to it
-- ARGV[3]  its lease, ms (renewed when it is handed any)
-- ARGV[4..] the update ids (one the caller no longer holds is left alone: another took it)
-- Returns  {update id, record, ...}: the updates now the caller's, each key's oldest first
--- @include "keys"
--- @include "now_ms"
--- @include "inbox_dead_holder"
--- @include "inbox_run"
local me = ARGV[1]
local seen, keys = {}, {}
for i = 4, #ARGV do
  local id = ARGV[i]
  local at = redis.call('HGET', KEYS[3], id)
  if at then
    local holder, key = string.match(at, '^(%S+) (.+)$')
    if holder == me then
      redis.call('HDEL', KEYS[2], id)
      redis.call('HDEL', KEYS[3], id)
      redis.call('ZREM', inbox_held_key(me), id)
      redis.call('ZREM', inbox_key_key(key), id)
      if not seen[key] then
        seen[key] = true
        keys[#keys + 1] = key
      end
    end
  end
end
local out, room, now = {}, tonumber(ARGV[2]), now_ms()
local gone = inbox_dead_holder(KEYS[4], KEYS[5], me, 0, now)
for _, key in ipairs(keys) do
  room = room - inbox_run(KEYS[2], KEYS[3], key, me, gone, room, out)
end
if #out > 0 then redis.call('ZADD', KEYS[4], now + tonumber(ARGV[3]), me) end
return out
