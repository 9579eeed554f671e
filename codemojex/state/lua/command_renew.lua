-- command_renew: extend the run lease of a command message while its process runs it, only
-- while the lease is still this process's.
--
-- KEYS[1]  the message's mark (`cmx:{q}:seen:<chat>:<message>`)
-- ARGV[1]  this process's lease value, 'run:<owner>'
-- ARGV[2]  the lease's new time to live, ms
-- Returns  1 when renewed, 0 when the mark is done, gone or another process's
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
