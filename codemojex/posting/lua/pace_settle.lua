-- pace_settle: the post of a grant was answered; measure the next post from the answer. The
-- answer comes after Telegram received the post, so however slow one request was, two posts
-- never arrive closer together than the limits allow.
--
-- KEYS[1]    the chat's second (`cmx:{q}:pace:c:<chat>`): moved to answer + interval if earlier
-- KEYS[2..]  the sorted sets the grant was taken in (`cmx:{q}:pace:g`, a group's
--            `cmx:{q}:pace:m:<chat>`): the grant's entry takes the time of the answer (in
--            the bot's second, it was in flight until now: see pace_take.lua)
-- ARGV[1]    the grant's token
-- ARGV[2]    the chat's interval, ms
-- Returns    0 (an entry no longer there is left alone)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local next_ms = now + tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < next_ms then
  redis.call('SET', KEYS[1], next_ms, 'PX', tonumber(ARGV[2]) + 1000)
end
for i = 2, #KEYS do
  if redis.call('ZSCORE', KEYS[i], ARGV[1]) then
    redis.call('ZADD', KEYS[i], 'XX', now, ARGV[1])
  end
end
return 0
