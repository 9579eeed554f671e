-- budget_take: spend one of a member's answers in a chat (a GCRA: `budget` answers at once
-- from a whole budget, one more every window / budget ms). Past it the member is told once to
-- slow down, and then gets nothing until the budget is whole again.
--
-- KEYS[1]  the member's budget in the chat (`cmx:{q}:answers:<chat>:<member>`): a hash of
--          `full` (the ms at which the budget is whole again) and `told` (the notice was
--          given); it expires when the budget is whole, and the notice with it
-- ARGV[1]  the budget (answers)   ARGV[2] the window it refills over, ms
-- Returns  1 answer, 2 tell them to slow down (once), 0 say nothing. The clock is the
--          server's TIME.
if redis.call('HEXISTS', KEYS[1], 'told') == 1 then
  return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local budget, window = tonumber(ARGV[1]), tonumber(ARGV[2])
local full = tonumber(redis.call('HGET', KEYS[1], 'full') or '0')
if full < now then full = now end
full = full + window / budget
if full - now <= window then
  redis.call('HSET', KEYS[1], 'full', full)
  redis.call('PEXPIRE', KEYS[1], math.ceil(full - now))
  return 1
end
redis.call('HSET', KEYS[1], 'told', 1)
return 2
