-- lease_renew: extend a sender's lease on a chat, only if it still holds it.
--
-- KEYS[1]  the chat lease (`cmx:{q}:send:lease:<chat>`)
-- ARGV[1]  the holder's token
-- ARGV[2]  the new time to live, in ms
-- Returns  1 when renewed, 0 when the lease is gone or another sender's
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
