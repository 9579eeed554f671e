-- ring_add: chats that were given outbox rows join the posting ring, their turn when their
-- pace next allows a post (noted by ring_release in `send:cool` when the chat left the ring),
-- else now: a chat that just posted waits behind the chats already waiting instead of taking
-- a turn its pace would refuse. A chat already in the ring keeps its turn (a flooding chat
-- never moves ahead of the others) and is marked dirty, so that a sender holding it looks
-- again before handing it back.
--
-- KEYS[1]  the prefix `cmx:{q}:` (names no key; the script builds RING, DIRTY and COOL on it:
--          posting/keys.py)
-- ARGV[1]  a chat id; ARGV[2..] more chat ids
-- Returns  how many chats were new to the ring
--- @include "keys"
--- @include "now_ms"
local now = now_ms()
redis.call('ZREMRANGEBYSCORE', COOL, '-inf', now)
local added = 0
for i = 1, #ARGV do
  local turn = tonumber(redis.call('ZSCORE', COOL, ARGV[i]) or now)
  if redis.call('ZADD', RING, 'NX', turn, ARGV[i]) == 1 then
    added = added + 1
  else
    redis.call('SADD', DIRTY, ARGV[i])
  end
end
return added
