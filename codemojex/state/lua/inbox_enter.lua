-- inbox_enter: updates a webhook process was just handed, checked against what any process
-- keeps parked, in one call: an update whose order key has parked updates waits behind them
-- (one order per key across processes), parked at once so that it may be answered.
--
-- KEYS[1]  the prefix `cmx:{q}:` (names no key: a key's and a holder's sets, inbox_park)
-- KEYS[2]  the parked updates (`cmx:{q}:inbox:parked`)
-- KEYS[3]  where each is (`cmx:{q}:inbox:where`: update id -> "<holder> <key>")
-- ARGV[1]  the caller (its holder name)
-- ARGV[2..] triples: update id, order key, record ('' on a first call: most updates have
--          nothing parked before them, and their JSON need not travel)
-- Returns  one number per update: 0 its key has nothing parked (the caller runs it now);
--          1 parked behind its key's updates another process holds (taken with them); 2
--          parked behind the caller's own (it runs it after them); 3 parked already (a copy
--          of an update some process keeps: it is answered, never run twice); 4 it must
--          wait behind its key, and its record was not given: nothing written, call again
--          with it
--- @include "keys"
local me = ARGV[1]
local out = {}
for i = 2, #ARGV, 3 do
  local id, key = ARGV[i], ARGV[i + 1]
  if redis.call('HEXISTS', KEYS[2], id) == 1 then
    out[#out + 1] = 3
  else
    local last = redis.call('ZRANGE', inbox_key_key(key), -1, -1)[1]
    if not last then
      out[#out + 1] = 0
    elseif ARGV[i + 2] == '' then
      out[#out + 1] = 4
    else
      local at = redis.call('HGET', KEYS[3], last)
      local holder = (at and string.match(at, '^(%S+) ') == me) and me or '-'
      redis.call('HSET', KEYS[2], id, ARGV[i + 2])
      redis.call('HSET', KEYS[3], id, holder .. ' ' .. key)
      redis.call('ZADD', inbox_key_key(key), id, id)
      redis.call('ZADD', inbox_held_key(holder), id, id)
      out[#out + 1] = holder == me and 2 or 1
    end
  end
end
return out
