-- command_claim: claim a command message for this process before running it, so that a
-- delivery of the same message again runs it at most once more than needed: never while it
-- runs or after it finished, again only when the process that was running it died.
--
-- KEYS[1]  the message's mark (`cmx:{q}:seen:<chat>:<message>`): absent, 'run:<owner>' while
--          process <owner> runs it, or 'done' once it finished
-- ARGV[1]  this process's owner token   ARGV[2] how long the mark lives, ms (the dedupe window)
-- Returns  1 claimed (absent, or left 'run' by another owner: that process died, since a
--          message is delivered again only when nobody confirmed it), 0 not to run (done, or
--          running here now)
local mark = redis.call('GET', KEYS[1])
local mine = 'run:' .. ARGV[1]
if mark == 'done' or mark == mine then
  return 0
end
redis.call('SET', KEYS[1], mine, 'PX', ARGV[2])
return 1
