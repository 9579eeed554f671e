-- pace_settle: the post of a grant was answered; measure the next post from the answer. The
-- answer comes after Telegram received the post, so however slow one request was, two posts
-- never arrive closer together than the limits allow.
--
-- KEYS[1]    the chat's second (`cmx:{q}:pace:c:<chat>`): moved to answer + interval if earlier
-- KEYS[2]    the bot's rate (`cmx:{q}:pace:b:<bot>:rate`): its `lat` is a moving average of
--            the time from a grant to its answer (ms), which pace_refused.lua needs
-- KEYS[3..]  the sorted sets the grant was taken in (the bot's second
--            `cmx:{q}:pace:b:<bot>:s` first, a group's `cmx:{q}:pace:m:<chat>`): the
--            grant's entry takes the time of the answer (in the bot's second, it was in
--            flight until now, scored its grant + ARGV[3]: see pace_take.lua)
-- ARGV[1]    the grant's token
-- ARGV[2]    the chat's interval, ms
-- ARGV[3]    how long a grant never answered counts as in flight, ms
-- Returns    0 (an entry no longer there is left alone)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local next_ms = now + tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < next_ms then
  redis.call('SET', KEYS[1], next_ms, 'PX', tonumber(ARGV[2]) + 1000)
end
for i = 3, #KEYS do
  local score = redis.call('ZSCORE', KEYS[i], ARGV[1])
  if score then
    redis.call('ZADD', KEYS[i], 'XX', now, ARGV[1])
    local granted = tonumber(score) - tonumber(ARGV[3])
    -- (Only into a rate's hash that exists: its time to live is pace_take.lua's to set.)
    if i == 3 and tonumber(score) > now and granted <= now
      and redis.call('EXISTS', KEYS[2]) == 1 then
      local lat = tonumber(redis.call('HGET', KEYS[2], 'lat') or (now - granted))
      redis.call('HSET', KEYS[2], 'lat', tostring(lat * 0.9 + (now - granted) * 0.1))
    end
  end
end
return 0
