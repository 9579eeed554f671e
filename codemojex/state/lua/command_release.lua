-- command_release: give back the run lease of a command message that failed before its
-- effect committed, so that its next delivery runs it; only while the lease is still this
-- process's (one that ran out and was taken by another process is theirs).
--
-- KEYS[1]  the message's mark (`cmx:{q}:seen:<chat>:<message>`)
-- ARGV[1]  this process's lease value, 'run:<owner>'
-- Returns  1 given back, 0 not ours (done, another's, or gone)
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
