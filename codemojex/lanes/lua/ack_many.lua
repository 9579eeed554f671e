-- ack_many: complete a batch of leased jobs in one round trip; stale tokens are skipped.
--
-- KEYS[1]  the queue prefix `emq:{q}:`
-- ARGV     job id, attempts, job id, attempts, ...
-- Returns  how many were acked
local n = 0
for i = 1, #ARGV, 2 do
  local jk, room = holder(ARGV[i], ARGV[i + 1])
  if jk then
    redis.call('ZREM', ACTIVE, ARGV[i])
    redis.call('DEL', jk)
    permit_freed(room)
    n = n + 1
  end
end
return n
