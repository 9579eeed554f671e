-- pace_take: take one posting slot for a chat (its second; for a group also its minute,
-- spread evenly) and for the bot (its second), honouring the chat's RetryAfter block: in all
-- of them at once, or in none. Every limit answers with its wait, so a caller sleeps exactly
-- that long.
--
-- Two kinds of post share these limits: the results (and round announcements: the outbox
-- sender) and the bot's own answers. A grant's token starts with its kind ('r:' or 'a:'), so
-- every log holds both and each kind can be held to its own share of it. The answers get what
-- the results leave, never all of it:
-- - a group's minute: a kind's own grants are spread evenly over its share (`limit`), and
--   every grant of both counts against the minute's `total`. Answers take at most their share
--   and, past their `reserve` (the minute's post the results never use), only while the
--   minute holds fewer than `total - share` posts: the results' part is theirs alone;
-- - the bot's second: every grant counts against `bot_limit`; answers take at most their
--   `bot_share`, and only while the second holds fewer than `bot_limit - bot_share` posts, so
--   spammers in many chats take nothing from results that need the bot's whole second;
-- - a chat's second: every post counts; answers also keep `gap` ms between each other
--   (KEYS[4]), so a result waiting for the chat gets the second between two answers.
--
-- A group's minute, spread: the k-th newest grant p_k of the kind must be at least k spacings
-- old, less a burst credit that shrinks from (burst-1) spacings at k = 1 to none at
-- k = limit - 1, and the limit-th newest a whole window old (the sliding minute). So a group
-- that was quiet posts `burst` messages at its second's pace, and a busy one a message every
-- spacing (3 s), its burst paid back over the minute instead of by a silence.
--
-- The bot's second needs no margin for the wire: a grant whose post is still in flight counts
-- as "now" (it is scored `flight` ms ahead, so it is the newest) until pace_settle stamps it
-- with the time of the answer, which comes after Telegram received the post. So any 31 posts
-- Telegram received within a second would have had the last one granted while the other 30
-- were counted: the limit holds for any time on the wire, and the bot posts at 30 per
-- (1 s + the time from a grant to its answer) instead of 30 per 1 s + a fixed margin.
--
-- The bot's limit is learned (pacer.py says why and how): KEYS[5] holds the rate every
-- process shares, starting at the configured one (ARGV[4]) and kept within the floor and
-- the ceiling (ARGV[9], ARGV[10]). It rises only while a result waits for the bot's second
-- (the rate binds), the bot is not paused and no cut holds it (`held`), by the time spent
-- so (`epoch`, ms; at most RISE_STEP_MS counted at once: a rate unused for a while does not
-- jump):
-- - before any cut, by ARGV[11] per mille of itself a second (a slow start);
-- - after a cut, along a cubic of the epoch through the rate where the cut came (`top`):
--   from the cut rate back to `top` in ARGV[13] ms, flat near it, then faster and faster
--   past it (Telegram may allow more now). ARGV[12] is the cut's per mille kept;
-- - with ARGV[13] 0 instead, by ARGV[11] per mille of the configured rate a second, before
--   and after cuts (additive increase: the law bench.pace_law compares the cubic with).
-- pace_refused.lua cuts it. A floor equal to the ceiling is a fixed rate. A learned rate
-- is also spread evenly (a GCRA in the hash's `tat`, one post every 1/rate s, bursts of
-- ARGV[14] ms' worth): the sliding second alone lets a whole second's posts go at once, so
-- the first second above Telegram's limit would be refused post after post.
--
-- KEYS[1]  the chat's second (`cmx:{q}:pace:c:<chat>`): a GCRA, the ms of its next free slot
-- KEYS[2]  the chat's block (`cmx:{q}:pace:block:c:<chat>`): "nobody posts before <ms>"
-- KEYS[3]  the bot's second (`cmx:{q}:pace:b:<bot>:s`): sorted set of grant tokens scored by
--          the ms of their answer (in flight: of their grant + ARGV[6])
-- KEYS[4]  the chat's answers (`cmx:{q}:pace:a:<chat>`): the ms of its next answer's slot
-- KEYS[5]  the bot's rate (`cmx:{q}:pace:b:<bot>:rate`): hash, `rate` (posts a second, a
--          float), `held` (no rise before <ms>), `raised` (ms of the last rise), `top` (the
--          rate at the last cut), `epoch` (ms of binding since it)
-- KEYS[6]  the bot's block (`cmx:{q}:pace:b:<bot>:block`): "nobody posts before <ms>"
-- KEYS[7]  groups only: the group's minute (`cmx:{q}:pace:m:<chat>`): sorted set of grant
--          tokens scored by the ms of their grant, then of their answer
-- ARGV[1]  the kind of post: 'r' a result, 'a' an answer
-- ARGV[2]  the grant's token (`<kind>:<chat>:<id>`); '' only asks how long to wait
-- ARGV[3]  the chat's interval, ms (margin included)
-- ARGV[4]  the bot's configured rate (where the learned one starts)
-- ARGV[5]  the bot's window, ms (no margin: see above)
-- ARGV[6]  how long a grant never answered counts as in flight, ms (longer than any post)
-- ARGV[7]  answers: their share of the configured rate (results: the rate itself); of the
--          learned one they take the same proportion
-- ARGV[8]  ms between two answers to one chat (0: no such gap, the results)
-- ARGV[9]  the rate's floor  ARGV[10] its ceiling  ARGV[11] its slow start, per mille of
--          itself a second  ARGV[12] a cut's per mille kept  ARGV[13] ms back to `top`
-- ARGV[14] a learned rate's burst, in ms of its posts  ARGV[15] the rate's time to live, ms
-- ARGV[16] groups: spacing ms ARGV[17] burst (posts a quiet group may make at its second's
--          pace) ARGV[18] this kind's share of the minute ARGV[19] its window, ms (margin
--          included) ARGV[20] every post's limit in the minute ARGV[21] answers: how many a
--          minute they may post whatever the results use (their reserve)
-- Returns  {wait ms, who, the bot's limit now (posts its second holds)}: wait 0 and who 0 when
--          the slot was taken; else nothing was taken, and who is 1 when the chat's own
--          limits (or its block) bind longest, 2 when the bot's do (its second or its
--          block). The clock is the server's TIME.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local kind, token = ARGV[1], ARGV[2]
local group = #KEYS >= 7
-- A binding second counts this much towards a rise at most (ms).
local RISE_STEP_MS = 250
local wait, who = 0, 0

local function need(w, by)
  if w > wait then wait, who = w, by end
end

local function gcra_wait(key)
  return tonumber(redis.call('GET', key) or '0') - now
end

local function block_wait(key)
  local until_ms = redis.call('GET', key)
  if until_ms then return tonumber(until_ms) - now end
  return 0
end

-- A grant's kind; a token of an older release (no kind) counts as a result.
local function kind_of(member)
  if string.sub(member, 1, 2) == 'a:' then return 'a' end
  return 'r'
end

-- The grants of a log within its window, newest first: {token, score, token, score, ...}.
local function recent(key, win)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - win)
  return redis.call('ZREVRANGE', key, 0, 999, 'WITHSCORES')
end

-- Until the n-th newest grant of any kind leaves the window, reading that entry alone (a
-- log of hundreds of grants a second is never read whole for a result).
local function nth_wait_any(key, n, win)
  local entry = redis.call('ZREVRANGE', key, n - 1, n - 1, 'WITHSCORES')
  if not entry[2] then return 0 end
  local at = tonumber(entry[2])
  if at > now then return win end
  return at + win - now
end

-- Until the n-th newest grant (of kind `of`; of any when nil) leaves the window. A grant
-- still in flight (scored ahead of now) will be answered at the earliest now, so it leaves
-- at least `win` from now (asked again then).
local function nth_wait(entries, of, n, win)
  local seen = 0
  for i = 1, #entries, 2 do
    if of == nil or kind_of(entries[i]) == of then
      seen = seen + 1
      if seen == n then
        local at = tonumber(entries[i + 1])
        if at > now then return win end
        return at + win - now
      end
    end
  end
  return 0
end

local function count_of(entries, of)
  local n = 0
  for i = 1, #entries, 2 do
    if kind_of(entries[i]) == of then n = n + 1 end
  end
  return n
end

-- A kind's grants in a group's minute, spread evenly (see above).
local function spread_wait(entries, of, limit, win, spacing, burst)
  local w, k = 0, 0
  for i = 1, #entries, 2 do
    if kind_of(entries[i]) == of then
      k = k + 1
      local p = tonumber(entries[i + 1])
      local due
      if k >= limit then
        due = p + win
      else
        due = p + k * spacing - (burst - 1) * spacing * (limit - k) / (limit - 1)
      end
      if due - now > w then w = due - now end
      if k >= limit then break end
    end
  end
  return w
end

local chat_ms = tonumber(ARGV[3])
local start, bot_win, flight = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local own, gap = tonumber(ARGV[7]), tonumber(ARGV[8])
local floor_rate, ceiling = tonumber(ARGV[9]), tonumber(ARGV[10])
local start_pm, keep = tonumber(ARGV[11]), tonumber(ARGV[12]) / 1000
local regain_s = tonumber(ARGV[13]) / 1000
need(gcra_wait(KEYS[1]), 1)
need(block_wait(KEYS[2]), 1)
if gap > 0 then need(gcra_wait(KEYS[4]), 1) end
local min_win
if group then
  local spacing, burst = tonumber(ARGV[16]), tonumber(ARGV[17])
  local share, total = tonumber(ARGV[18]), tonumber(ARGV[20])
  min_win = tonumber(ARGV[19])
  local minute = recent(KEYS[7], min_win)
  need(spread_wait(minute, kind, share, min_win, spacing, burst), 1)
  need(nth_wait(minute, nil, math.max(total, share), min_win), 1)
  if kind == 'a' and share < total and count_of(minute, 'a') >= tonumber(ARGV[21]) then
    need(nth_wait(minute, nil, total - share, min_win), 1)
  end
end

-- The bot's second, at the learned rate.
local learning = floor_rate < ceiling
local rate = start
if learning then
  rate = tonumber(redis.call('HGET', KEYS[5], 'rate') or start)
  rate = math.max(floor_rate, math.min(ceiling, rate))
end
local limit = math.max(1, math.floor(rate))
-- Kept a chat interval past the window: pace_refused.lua looks that far back for the chat.
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - bot_win - chat_ms)
local bot_wait = nth_wait_any(KEYS[3], limit, bot_win)
local spacing_ms, tat = 0, 0
if learning then
  spacing_ms = bot_win / rate
  tat = tonumber(redis.call('HGET', KEYS[5], 'tat') or '0')
  local burst_n = math.max(1, math.floor(tonumber(ARGV[14]) / spacing_ms))
  bot_wait = math.max(bot_wait, tat - (burst_n - 1) * spacing_ms - now)
end
need(bot_wait, 2)
local paused = block_wait(KEYS[6])
need(paused, 2)
if kind == 'a' and own < start then
  local bot_share = math.max(1, math.floor(limit * own / start))
  if bot_share < limit then
    local second = recent(KEYS[3], bot_win + chat_ms)
    need(nth_wait(second, 'a', bot_share, bot_win), 2)
    need(nth_wait_any(KEYS[3], limit - bot_share, bot_win), 2)
  end
end
if learning and kind == 'r' and bot_wait > 0 and paused <= 0 then
  local state = redis.call('HMGET', KEYS[5], 'held', 'raised', 'top', 'epoch')
  if now >= tonumber(state[1] or '0') then
    local step = math.min(RISE_STEP_MS, now - tonumber(state[2] or now))
    if step > 0 then
      local top = tonumber(state[3] or '0')
      local epoch = tonumber(state[4] or '0') + step
      if regain_s <= 0 then
        rate = rate + start * start_pm / 1000 * step / 1000
      elseif top <= 0 then
        rate = rate * (1 + start_pm / 1000 * step / 1000)
      else
        local x = epoch / 1000 - regain_s
        rate = math.max(rate, top * (1 + (1 - keep) * x * x * x / (regain_s ^ 3)))
      end
      rate = math.min(ceiling, rate)
      redis.call('HSET', KEYS[5], 'rate', tostring(rate), 'raised', now, 'epoch', epoch)
    else
      redis.call('HSET', KEYS[5], 'raised', now)
    end
    redis.call('PEXPIRE', KEYS[5], tonumber(ARGV[15]))
  end
end
wait = math.ceil(wait)
if wait > 0 or token == '' then
  return {wait, who, limit}
end

-- Trimmed by age (at each check), not to this caller's limit: the results and the bot's
-- answers keep a log with different limits, and each must see every post.
local function log_take(key, at, win)
  redis.call('ZADD', key, at, token)
  redis.call('ZREMRANGEBYRANK', key, 0, -1001)
  redis.call('PEXPIRE', key, at - now + win + 60000)
end

-- The chat's own GCRA (`tat` is the bot's: its spread is stored below).
local chat_tat = math.max(now, tonumber(redis.call('GET', KEYS[1]) or '0'))
redis.call('SET', KEYS[1], chat_tat + chat_ms, 'PX', chat_tat + chat_ms - now + 1000)
if gap > 0 then
  redis.call('SET', KEYS[4], now + gap, 'PX', gap + 1000)
end
log_take(KEYS[3], now + flight, bot_win + chat_ms)
if learning then
  redis.call('HSET', KEYS[5], 'tat', tostring(math.max(tat, now) + spacing_ms))
  redis.call('PEXPIRE', KEYS[5], tonumber(ARGV[15]))
end
if group then
  log_take(KEYS[7], now, min_win)
end
return {0, 0, limit}
