-- pace_refused: Telegram answered a post with 429 (RetryAfter). Telegram names no scope, so
-- the pace says what explains it, from what it knows of the post's chat:
-- - the chat's own pace: another post to the chat within a chat interval before this answer
--   (the pace never grants that: a post it did not grant, or Telegram's chat limit is
--   stricter than the setting);
-- - the group's own pace: the group's minute already held every post it may (this one
--   included);
-- - else nothing the chat did: the bot as a whole posts faster than Telegram allows now.
-- The chat's or the group's 429 blocks that chat for retry_after (as pace_block). The bot's
-- pauses every post of the bot for retry_after (the bot's block, which pace_take honours)
-- and cuts the learned rate to ARGV[9] per mille of what Telegram took (never below the
-- floor): of the posts answered in the bot's last second (ARGV[11] ms), which is what
-- Telegram had just taken when it refused this one, counted as the bot's second counts
-- (a post in flight for the time from a grant to its answer: the rate hash's `lat`, which
-- pace_settle.lua keeps), or of the rate if that is lower; unless
-- a cut already holds (`held`, ARGV[10] ms after a cut: the posts in flight when the first
-- 429 came are answered 429 too, and they are the same overshoot). The rate where the cut
-- came is kept (`top`: that estimate of Telegram's limit) and the time risen since starts
-- again (`epoch`): pace_take.lua climbs back towards it. A refused post took no place in
-- Telegram's limits: its grant leaves the bot's second and the group's minute. Each 429 is counted by
-- its cause in the rate's hash (`chat`, `group`, `bot`; `cuts`): the metrics read them.
--
-- KEYS[1]  the bot's second (`cmx:{q}:pace:b:<bot>:s`, see pace_take.lua)
-- KEYS[2]  the bot's rate (`cmx:{q}:pace:b:<bot>:rate`, see pace_take.lua)
-- KEYS[3]  the bot's block (`cmx:{q}:pace:b:<bot>:block`)
-- KEYS[4]  the chat's block (`cmx:{q}:pace:block:c:<chat>`)
-- KEYS[5]  groups only: the group's minute (`cmx:{q}:pace:m:<chat>`)
-- ARGV[1]  the refused grant's token (`<kind>:<chat>:<id>`, as in the logs)
-- ARGV[2]  retry_after, ms (>= 1)
-- ARGV[3]  the chat's interval, ms
-- ARGV[4]  every post's limit in a group's minute  ARGV[5] the minute's window, ms
-- ARGV[6]  the bot's configured rate  ARGV[7] the rate's floor  ARGV[8] its ceiling
-- ARGV[9]  a cut, per mille of the rate kept  ARGV[10] how long a cut holds, ms
-- ARGV[11] the bot's window, ms  ARGV[12] the rate's time to live, ms
-- Returns  {cause, the learned rate in thousandths of a post a second}: cause 1 the chat,
--          2 the group, 3 the bot
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local token, retry_ms = ARGV[1], tonumber(ARGV[2])
local chat_ms = tonumber(ARGV[3])
local start, floor_rate, ceiling = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local keep_pm, hold_ms = tonumber(ARGV[9]), tonumber(ARGV[10])

-- `<kind>:<chat>:` of the token: another grant of this chat starts the same way.
local chat_prefix = string.match(token, '^[^:]*:%-?%d+:') or token

local function block(key)
  local until_ms = now + retry_ms
  local cur = redis.call('GET', key)
  if not cur or tonumber(cur) < until_ms then
    redis.call('SET', key, until_ms, 'PX', retry_ms + 1000)
  end
end

local function same_chat(member)
  local head = string.match(member, '^[^:]*:%-?%d+:')
  return member ~= token and head ~= nil and
    string.sub(head, 3) == string.sub(chat_prefix, 3)
end

redis.call('ZREM', KEYS[1], token)
if #KEYS >= 5 then redis.call('ZREM', KEYS[5], token) end

local cause = 3
local recent = redis.call('ZRANGEBYSCORE', KEYS[1], now - chat_ms, '+inf')
for _, member in ipairs(recent) do
  if same_chat(member) then
    cause = 1
    break
  end
end
if cause == 3 and #KEYS >= 5 then
  local others = redis.call('ZCOUNT', KEYS[5], now - tonumber(ARGV[5]), '+inf')
  if others + 1 >= tonumber(ARGV[4]) then cause = 2 end
end

local rate = tonumber(redis.call('HGET', KEYS[2], 'rate') or start)
rate = math.max(floor_rate, math.min(ceiling, rate))
if cause == 3 then
  redis.call('HINCRBY', KEYS[2], 'bot', 1)
  block(KEYS[3])
  local held = tonumber(redis.call('HGET', KEYS[2], 'held') or '0')
  if floor_rate < ceiling and now >= held then
    local win = tonumber(ARGV[11])
    local taken = redis.call('ZCOUNT', KEYS[1], now - win, now)
    local lat = tonumber(redis.call('HGET', KEYS[2], 'lat') or '0')
    local top = math.max(floor_rate, math.min(rate, taken * (1 + lat / win)))
    redis.call('HSET', KEYS[2], 'top', tostring(top))
    rate = math.max(floor_rate, top * keep_pm / 1000)
    redis.call('HSET', KEYS[2], 'rate', tostring(rate), 'held', now + hold_ms, 'raised', now,
      'epoch', 0)
    redis.call('HINCRBY', KEYS[2], 'cuts', 1)
  end
else
  redis.call('HINCRBY', KEYS[2], cause == 1 and 'chat' or 'group', 1)
  block(KEYS[4])
end
redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[12]))
return {cause, math.floor(rate * 1000)}
