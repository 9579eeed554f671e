-- inbox_take: take over parked updates whose lease ran out (the process that parked them
-- died, or stopped without finishing them): leased anew to the caller, oldest update first.
--
-- KEYS[1]  the parked updates (`cmx:{q}:inbox:parked`)
-- KEYS[2]  their leases (`cmx:{q}:inbox:lease`)
-- ARGV[1]  the lease, ms    ARGV[2] at most this many
-- Returns  {update id, record, update id, record, ...} (the caller sorts them by id)
--- @include "now_ms"
local now = now_ms()
local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
local out = {}
for _, id in ipairs(due) do
  local record = redis.call('HGET', KEYS[1], id)
  if record then
    redis.call('ZADD', KEYS[2], now + tonumber(ARGV[1]), id)
    out[#out + 1] = id
    out[#out + 1] = record
  else
    redis.call('ZREM', KEYS[2], id)
  end
end
return out
