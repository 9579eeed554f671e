-- lease_release: give a chat back, only if this sender still holds it.
--
-- KEYS[1]  the chat lease (`cmx:{q}:send:lease:<chat>`)
-- ARGV[1]  the holder's token
-- Returns  1 when released, 0 when the lease was gone or another sender's
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
