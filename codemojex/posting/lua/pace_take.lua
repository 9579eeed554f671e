-- pace_take: take one posting slot for a chat (its second; for a group also its spacing and
-- its minute) and for the bot (its second), honouring RetryAfter blocks: in all of them at
-- once, or in none. Every limit answers with its wait, so a caller sleeps exactly that long.
--
-- KEYS[1]  the chat's second (`cmx:{q}:pace:c:<chat>`): a GCRA, the ms of its next free slot
-- KEYS[2]  the chat's block (`cmx:{q}:pace:block:c:<chat>`): "nobody posts before <ms>"
-- KEYS[3]  the bot's second (`cmx:{q}:pace:g`): sorted set of grant tokens scored by ms
-- KEYS[4]  the bot's block (`cmx:{q}:pace:block:g`)
-- KEYS[5]  groups only: the spacing (`cmx:{q}:pace:s:<chat>`): a GCRA with a burst
-- KEYS[6]  groups only: the minute (`cmx:{q}:pace:m:<chat>`): sorted set as KEYS[3]
-- ARGV[1]  the grant's token; '' only asks how long to wait and takes nothing
-- ARGV[2]  the chat's interval, ms (margin included)
-- ARGV[3]  the bot's limit    ARGV[4] the bot's window, ms (margin included)
-- ARGV[5]  groups: spacing ms ARGV[6] burst (posts a quiet group may make at once)
-- ARGV[7]  groups: the minute's limit  ARGV[8] its window, ms (margin included)
-- Returns  {wait ms, who}: {0, 0} when the slot was taken; else nothing was taken, and who is
--          1 when the chat's own limits (or its block) bind longest, 2 when the bot's do.
--          The clock is the server's TIME.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local token = ARGV[1]
local group = #KEYS >= 6
local wait, who = 0, 0

local function need(w, by)
  if w > wait then wait, who = w, by end
end

local function gcra_wait(key, interval, burst)
  local tat = tonumber(redis.call('GET', key) or '0')
  return tat - (burst - 1) * interval - now
end

local function log_wait(key, limit, win)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - win)
  if redis.call('ZCARD', key) >= limit then
    local entry = redis.call('ZRANGE', key, -limit, -limit, 'WITHSCORES')
    return tonumber(entry[2]) + win - now
  end
  return 0
end

local function block_wait(key)
  local until_ms = redis.call('GET', key)
  if until_ms then return tonumber(until_ms) - now end
  return 0
end

local chat_ms = tonumber(ARGV[2])
local bot_limit, bot_win = tonumber(ARGV[3]), tonumber(ARGV[4])
need(gcra_wait(KEYS[1], chat_ms, 1), 1)
need(block_wait(KEYS[2]), 1)
local spacing, burst, min_limit, min_win
if group then
  spacing, burst = tonumber(ARGV[5]), tonumber(ARGV[6])
  min_limit, min_win = tonumber(ARGV[7]), tonumber(ARGV[8])
  need(gcra_wait(KEYS[5], spacing, burst), 1)
  need(log_wait(KEYS[6], min_limit, min_win), 1)
end
need(log_wait(KEYS[3], bot_limit, bot_win), 2)
need(block_wait(KEYS[4]), 2)
if wait > 0 or token == '' then
  return {wait, who}
end

local function gcra_take(key, interval)
  local tat = tonumber(redis.call('GET', key) or '0')
  if tat < now then tat = now end
  tat = tat + interval
  redis.call('SET', key, tat, 'PX', tat - now + 1000)
end

local function log_take(key, limit, win)
  redis.call('ZADD', key, now, token)
  redis.call('ZREMRANGEBYRANK', key, 0, -(limit + 1))
  redis.call('PEXPIRE', key, win + 60000)
end

gcra_take(KEYS[1], chat_ms)
log_take(KEYS[3], bot_limit, bot_win)
if group then
  gcra_take(KEYS[5], spacing)
  log_take(KEYS[6], min_limit, min_win)
end
return {0, 0}
