-- inbox_legacy: parked updates kept by a bot of the version before one lease per process
-- (each with a lease of its own in `cmx:{q}:inbox:lease`, no order key filed), whose lease
-- ran out: handed to the caller, which files them under their keys as its own (inbox_park).
--
-- KEYS[1]  the parked updates (`cmx:{q}:inbox:parked`)
-- KEYS[2]  the former leases (`cmx:{q}:inbox:lease`, zset: update id -> lease's end, ms)
-- ARGV[1]  at most this many
-- Returns  {update id, record, ...}
--- @include "now_ms"
local out = {}
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now_ms(), 'LIMIT', 0,
                               tonumber(ARGV[1]))) do
  redis.call('ZREM', KEYS[2], id)
  local record = redis.call('HGET', KEYS[1], id)
  if record then
    out[#out + 1] = id
    out[#out + 1] = record
  end
end
return out
