-- lease_fence: the fence before a post. Renew the chat lease and, only while the chat is
-- still ours, note the rows the post carries as about to go out (the intent markers), in
-- one atomic call.
--
-- KEYS[1]   the chat lease (`cmx:{q}:send:lease:<chat>`)
-- KEYS[2..] the intent markers of the rows (`cmx:{q}:send:sending:<row>`)
-- ARGV[1]   the holder's token
-- ARGV[2]   the lease's new time to live, in ms
-- ARGV[3]   the intent: "<owner>:<unix time>", for an operator reading the keys
-- ARGV[4]   the markers' time to live, in seconds
-- Returns   1 when the lease was renewed and the markers set, 0 (nothing written) when the
--           lease is gone or another sender's
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
for i = 2, #KEYS do
  redis.call('SET', KEYS[i], ARGV[3], 'EX', ARGV[4])
end
return 1
