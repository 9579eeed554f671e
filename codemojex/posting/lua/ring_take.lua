-- ring_take: a sender takes the chats whose turn has come, oldest turn first, each with a
-- chat lease. A taken chat stays in the ring with its turn moved past the lease, so that the
-- chats of a sender that died come round again when their leases run out.
--
-- KEYS[1]  the prefix `cmx:{q}:` (names no key; the script builds RING, DIRTY and each chat's
--          lease, chat_lease_key(chat), on it: posting/keys.py)
-- ARGV[1]  at most this many chats
-- ARGV[2]  the chat lease, ms
-- ARGV[3]  the lease's token (the holder's, checked by lease_renew, lease_fence, ring_release)
-- Returns  {ms until the next turn in the ring after these (-1: the ring is empty), chat...}
--- @include "keys"
--- @include "now_ms"
local now = now_ms()
local n, lease_ms, token = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local out = {-1}
if n > 0 then
  local due = redis.call('ZRANGEBYSCORE', RING, '-inf', now, 'LIMIT', 0, n)
  for _, chat in ipairs(due) do
    local lease = chat_lease_key(chat)
    if redis.call('SET', lease, token, 'NX', 'PX', lease_ms) then
      redis.call('SREM', DIRTY, chat)
      out[#out + 1] = chat
      redis.call('ZADD', RING, now + lease_ms, chat)
    else
      -- Held by a sender that renewed its lease: its turn comes when the lease would end.
      local left = redis.call('PTTL', lease)
      if left < 0 then left = lease_ms end
      redis.call('ZADD', RING, now + left, chat)
    end
  end
end
local first = redis.call('ZRANGE', RING, 0, 0, 'WITHSCORES')
if first[2] then
  local w = tonumber(first[2]) - now
  if w < 0 then w = 0 end
  out[1] = w
end
return out
