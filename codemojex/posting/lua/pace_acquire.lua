-- pace_acquire: take one posting slot in every window of a chat and of the bot, or none.
--
-- KEYS[1..n]     the windows (sorted sets of grant tokens scored by grant time, ms):
--                the chat's, then the bot's (`cmx:{q}:pace:c:<chat>:<i>`, `cmx:{q}:pace:g:<i>`)
-- KEYS[n+1..]    the blocks (`cmx:{q}:pace:block:c:<chat>`, `cmx:{q}:pace:block:g`): strings
--                holding "nobody posts before <ms>"
-- ARGV[1]        n, the number of windows
-- ARGV[2]        the grant's token; '' asks how long to wait and takes nothing
-- ARGV[2i+1], ARGV[2i+2]   window i's limit and length in ms (margin included), i = 1..n
-- Returns        0 when the slot was taken (in every window at once), else the milliseconds
--                until it could be (nothing taken). The clock is the server's TIME.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = tonumber(ARGV[1])
local token = ARGV[2]
local wait = 0
for i = 1, n do
  local limit = tonumber(ARGV[2 * i + 1])
  local win = tonumber(ARGV[2 * i + 2])
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now - win)
  if redis.call('ZCARD', KEYS[i]) >= limit then
    local entry = redis.call('ZRANGE', KEYS[i], -limit, -limit, 'WITHSCORES')
    local w = tonumber(entry[2]) + win - now
    if w > wait then wait = w end
  end
end
for j = n + 1, #KEYS do
  local until_ms = redis.call('GET', KEYS[j])
  if until_ms then
    local w = tonumber(until_ms) - now
    if w > wait then wait = w end
  end
end
if wait > 0 or token == '' then
  return wait
end
for i = 1, n do
  local limit = tonumber(ARGV[2 * i + 1])
  local win = tonumber(ARGV[2 * i + 2])
  redis.call('ZADD', KEYS[i], now, token)
  redis.call('ZREMRANGEBYRANK', KEYS[i], 0, -(limit + 1))
  redis.call('PEXPIRE', KEYS[i], win + 60000)
end
return 0
