-- poller_release: a poller that stops hands its lease on at once (a waiting one takes over
-- without waiting for it to run out).
--
-- KEYS[1]  the poller's lease (`cmx:{q}:poller:<bot id>`)
-- ARGV[1]  the caller's token
-- Returns  1 when released, 0 when it was not the caller's
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
