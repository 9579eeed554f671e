-- ring_add: chats that were given outbox rows join the posting ring. A chat already in the
-- ring keeps its turn (a flooding chat never moves ahead of the others) and is marked dirty,
-- so that a sender holding it looks again before handing it back.
--
-- KEYS[1]  the prefix `cmx:{q}:` (names no key; the scripts build `send:ring`, `send:dirty`)
-- ARGV[1]  a chat id; ARGV[2..] more chat ids
-- Returns  how many chats were new to the ring
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ring, dirty = KEYS[1] .. 'send:ring', KEYS[1] .. 'send:dirty'
local added = 0
for i = 1, #ARGV do
  if redis.call('ZADD', ring, 'NX', now, ARGV[i]) == 1 then
    added = added + 1
  else
    redis.call('SADD', dirty, ARGV[i])
  end
end
return added
