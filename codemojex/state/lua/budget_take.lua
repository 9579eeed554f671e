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
-- ARGV[3+i]   the update the answer of KEYS[i] is for ('' or absent: none): an update spends
--             once however often it is tried; its key's field `u` keeps the last MARKS
--             updates that spent and what each was told ("<update>=<said> ..."), whichever
--             process tried them
-- Returns     one per key, in order: 1 answer, 2 tell them to slow down (once), 0 say
--             nothing. The clock is the server's TIME.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local budget, window = tonumber(ARGV[1]), tonumber(ARGV[2])
local check = ARGV[3] == '1'
local MARKS = 8
local said = {}

-- What `mark` was told when it spent (nil: it has not), from the key's `u`.
local function told_before(key, mark)
  local marks = redis.call('HGET', key, 'u')
  if not marks then return nil end
  for m, s in string.gmatch(marks, '(%S+)=(%d)') do
    if m == mark then return tonumber(s) end
  end
  return nil
end

-- `mark` spent and was told `s`: kept with the last MARKS - 1 others.
local function remember(key, mark, s)
  local kept = {mark .. '=' .. s}
  for entry in string.gmatch(redis.call('HGET', key, 'u') or '', '%S+') do
    if #kept >= MARKS then break end
    kept[#kept + 1] = entry
  end
  redis.call('HSET', key, 'u', table.concat(kept, ' '))
end
for i = 1, #KEYS do
  local key = KEYS[i]
  local mark = ARGV[3 + i] or ''
  local before = mark ~= '' and told_before(key, mark) or nil
  if before then
    said[i] = before
  elseif redis.call('HEXISTS', key, 'told') == 1 then
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
    if mark ~= '' and not check and said[i] ~= 0 then remember(key, mark, said[i]) end
  end
end
return said
