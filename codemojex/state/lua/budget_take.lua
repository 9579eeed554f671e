-- budget_take: spend one answer from each of the members' budgets named, in order (a GCRA:
-- `budget` answers at once from a whole budget, one more every window / budget ms). Past it
-- a member is told once to slow down, and then gets nothing until the budget is whole again.
-- A key may come more than once (a member's several "too late" lines of one batch). With
-- `check`, an answer left is only found, not spent (a command that may post no answer asks
-- first; its answer, if any, spends it then); past the budget it tells as a spend does.
--
-- KEYS[1..n]  members' budgets in chats (`cmx:{q}:answers:<chat>:<member>`): each a hash of
--             `full` (the ms at which the budget is whole again) and `told` (the notice was
--             given); it expires when the budget is whole, and the notice with it
-- ARGV[1]     the budget (answers)   ARGV[2] the window it refills over, ms
-- ARGV[3]     `check`: 1 to find an answer left without spending it (default 0)
-- Returns     one per key, in order: 1 answer, 2 tell them to slow down (once), 0 say
--             nothing. The clock is the server's TIME.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local budget, window = tonumber(ARGV[1]), tonumber(ARGV[2])
local check = ARGV[3] == '1'
local said = {}
for i = 1, #KEYS do
  local key = KEYS[i]
  if redis.call('HEXISTS', key, 'told') == 1 then
    said[i] = 0
  else
    local full = tonumber(redis.call('HGET', key, 'full') or '0')
    if full < now then full = now end
    full = full + window / budget
    if full - now <= window then
      if not check then
        redis.call('HSET', key, 'full', full)
        redis.call('PEXPIRE', key, math.ceil(full - now))
      end
      said[i] = 1
    else
      redis.call('HSET', key, 'told', 1)
      said[i] = 2
    end
  end
end
return said
