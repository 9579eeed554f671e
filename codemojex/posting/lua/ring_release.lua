-- ring_release: a sender hands a chat back after its turn (one post, or none). The chat takes
-- its next turn after `delay` when it has more to post (or was given rows meanwhile: dirty),
-- and leaves the ring otherwise, its pace noted in `send:cool` for ring_add.
--
-- KEYS[1]  the prefix `cmx:{q}:` (names no key; the script builds RING, DIRTY, COOL and the
--          chat's lease, chat_lease_key(chat), on it: posting/keys.py)
-- ARGV[1]  the chat id
-- ARGV[2]  the holder's token
-- ARGV[3]  ms until the chat's pace allows its next post
-- ARGV[4]  1 when the holder knows rows are left, 0 when it posted all it found
-- Returns  1 when the chat stays in the ring, 0 when it left, -1 when the lease was no longer
--          this holder's (the ring is then the new holder's to keep, but a late holder that
--          handed rows back brings the chat's turn forward, never later: the turn that took
--          the chat meanwhile may have found those rows claimed and put it off until the
--          claim ran out, or left the ring)
--- @include "keys"
--- @include "now_ms"
local now = now_ms()
local chat = ARGV[1]
local lease = chat_lease_key(chat)
if redis.call('GET', lease) ~= ARGV[2] then
  if ARGV[4] == '1' then
    local delay = tonumber(ARGV[3])
    if delay < 0 then delay = 0 end
    redis.call('ZADD', RING, 'LT', now + delay, chat)
  end
  return -1
end
redis.call('DEL', lease)
local more = ARGV[4] == '1'
if redis.call('SREM', DIRTY, chat) == 1 then more = true end
if more then
  local delay = tonumber(ARGV[3])
  if delay < 0 then delay = 0 end
  redis.call('ZADD', RING, now + delay, chat)
  return 1
end
redis.call('ZREM', RING, chat)
local delay = tonumber(ARGV[3])
if delay > 0 then
  redis.call('ZADD', COOL, now + delay, chat)
  redis.call('PEXPIRE', COOL, 3600000)
end
return 0
