-- command_claim: take the run lease of a command message before running it, so that two
-- live processes given the same message never run it at once, and none runs it once it took
-- effect.
--
-- KEYS[1]  the message's mark (`cmx:{q}:seen:<chat>:<message>`): absent, 'run:<owner>'
--          while process <owner> runs it (a lease, renewed while it runs: it runs out when
--          that process died), or 'done' once its effect committed (never taken back)
-- ARGV[1]  this process's lease value, 'run:<owner>'
-- ARGV[2]  the lease's time to live, ms
-- Returns  'run' taken (it was absent), 'done' (took effect: not to run), 'busy' (a lease
--          holds it, this process's own included: wait for it to be done or let go)
local mark = redis.call('GET', KEYS[1])
if mark == 'done' then
  return 'done'
end
if mark then
  return 'busy'
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 'run'
