-- pace_block: "nobody posts here before now + ms" (Telegram answered RetryAfter); a block
-- only ever moves later.
--
-- KEYS[1]  the chat's block (`cmx:{q}:pace:block:c:<chat>`)
-- ARGV[1]  how long, in ms (>= 1)
-- Returns  1 when the block was set or moved later, 0 when a later one was already there
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local until_ms = now + tonumber(ARGV[1])
local cur = redis.call('GET', KEYS[1])
if cur and tonumber(cur) >= until_ms then
  return 0
end
redis.call('SET', KEYS[1], until_ms, 'PX', tonumber(ARGV[1]) + 1000)
return 1
