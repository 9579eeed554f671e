-- pace_take: take one posting slot for a chat (its second; for a group also its minute,
-- spread evenly) and for the bot (its second), honouring RetryAfter blocks: in all of them at
-- once, or in none. Every limit answers with its wait, so a caller sleeps exactly that long.
--
-- A group's minute: its last `limit` grants (a sorted set). The k-th newest grant p_k must be
-- at least k spacings old, less a burst credit that shrinks from (burst-1) spacings at k = 1
-- to none at k = limit - 1, and the limit-th newest a whole window old (the sliding minute).
-- So a group that was quiet posts `burst` messages at its second's pace, and a busy one a
-- message every spacing (3 s), its burst paid back over the minute instead of by a silence.
--
-- The bot's second needs no margin for the wire: a grant whose post is still in flight counts
-- as "now" (it is scored `flight` ms ahead, so it is the newest) until pace_settle stamps it
-- with the time of the answer, which comes after Telegram received the post. So any 31 posts
-- Telegram received within a second would have had the last one granted while the other 30
-- were counted: the limit holds for any time on the wire, and the bot posts at 30 per
-- (1 s + the time from a grant to its answer) instead of 30 per 1 s + a fixed margin.
--
-- KEYS[1]  the chat's second (`cmx:{q}:pace:c:<chat>`): a GCRA, the ms of its next free slot
-- KEYS[2]  the chat's block (`cmx:{q}:pace:block:c:<chat>`): "nobody posts before <ms>"
-- KEYS[3]  the bot's second (`cmx:{q}:pace:g`): sorted set of grant tokens scored by the ms
--          of their answer (in flight: of their grant + ARGV[5])
-- KEYS[4]  the bot's block (`cmx:{q}:pace:block:g`)
-- KEYS[5]  groups only: the group's minute (`cmx:{q}:pace:m:<chat>`): sorted set of grant
--          tokens scored by the ms of their grant, then of their answer
-- ARGV[1]  the grant's token; '' only asks how long to wait and takes nothing
-- ARGV[2]  the chat's interval, ms (margin included)
-- ARGV[3]  the bot's limit    ARGV[4] the bot's window, ms (no margin: see above)
-- ARGV[5]  how long a grant never answered counts as in flight, ms (longer than any post)
-- ARGV[6]  groups: spacing ms ARGV[7] burst (posts a quiet group may make at its second's pace)
-- ARGV[8]  groups: the minute's limit  ARGV[9] its window, ms (margin included); the bot's
--          answers ask with no spacing and the whole minute, the results with spacing and a
--          minute less the answers' reserve (limits.PACE_ANSWER_RESERVE), on the same keys
-- Returns  {wait ms, who}: {0, 0} when the slot was taken; else nothing was taken, and who is
--          1 when the chat's own limits (or its block) bind longest, 2 when the bot's do.
--          The clock is the server's TIME.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local token = ARGV[1]
local group = #KEYS >= 5
local wait, who = 0, 0

local function need(w, by)
  if w > wait then wait, who = w, by end
end

local function gcra_wait(key)
  return tonumber(redis.call('GET', key) or '0') - now
end

local function spread_wait(key, limit, win, spacing, burst)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - win)
  local entries = redis.call('ZREVRANGE', key, 0, limit - 1, 'WITHSCORES')
  local w = 0
  for k = 1, #entries / 2 do
    local p = tonumber(entries[2 * k])
    local due
    if k >= limit then
      due = p + win
    else
      due = p + k * spacing - (burst - 1) * spacing * (limit - k) / (limit - 1)
    end
    if due - now > w then w = due - now end
  end
  return math.ceil(w)
end

-- The limit-th newest leaves the window `win` after its answer; still in flight, it will be
-- answered at the earliest now, so at least `win` from now (asked again then).
local function flight_wait(key, limit, win)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - win)
  if redis.call('ZCARD', key) >= limit then
    local at = tonumber(redis.call('ZRANGE', key, -limit, -limit, 'WITHSCORES')[2])
    if at > now then return win end
    return at + win - now
  end
  return 0
end

local function block_wait(key)
  local until_ms = redis.call('GET', key)
  if until_ms then return tonumber(until_ms) - now end
  return 0
end

local chat_ms = tonumber(ARGV[2])
local bot_limit, bot_win, flight = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
need(gcra_wait(KEYS[1]), 1)
need(block_wait(KEYS[2]), 1)
local spacing, burst, min_limit, min_win
if group then
  spacing, burst = tonumber(ARGV[6]), tonumber(ARGV[7])
  min_limit, min_win = tonumber(ARGV[8]), tonumber(ARGV[9])
  need(spread_wait(KEYS[5], min_limit, min_win, spacing, burst), 1)
end
need(flight_wait(KEYS[3], bot_limit, bot_win), 2)
need(block_wait(KEYS[4]), 2)
if wait > 0 or token == '' then
  return {wait, who}
end

-- Trimmed by age (at each check), not to this caller's limit: the results and the bot's
-- answers keep a group's minute with different limits, and each must see every post.
local function log_take(key, at, win)
  redis.call('ZADD', key, at, token)
  redis.call('ZREMRANGEBYRANK', key, 0, -1001)
  redis.call('PEXPIRE', key, at - now + win + 60000)
end

local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
redis.call('SET', KEYS[1], tat + chat_ms, 'PX', tat + chat_ms - now + 1000)
log_take(KEYS[3], now + flight, bot_win)
if group then
  log_take(KEYS[5], now, min_win)
end
return {0, 0}
