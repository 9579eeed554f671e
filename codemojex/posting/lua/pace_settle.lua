-- pace_settle: the post of a grant was answered; its entries take the time of the answer.
-- The answer comes after Telegram received the post, so measuring the next post from it
-- means a slow request can never make two posts arrive closer together than a window allows.
--
-- KEYS[1..]  the windows the grant was taken in (as for pace_acquire)
-- ARGV[1]    the grant's token
-- Returns    0 (a window that no longer holds the token is left alone)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for i = 1, #KEYS do
  if redis.call('ZSCORE', KEYS[i], ARGV[1]) then
    redis.call('ZADD', KEYS[i], 'XX', now, ARGV[1])
  end
end
return 0
