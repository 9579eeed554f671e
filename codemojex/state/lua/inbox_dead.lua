-- inbox_dead: an update that cannot be handled (it cannot be read, or its handler failed
-- with a bug every try) goes to the dead letters, so that it is confirmed to Telegram and
-- never holds its chat again; the operator sees them on the ops page. A parked one is then
-- settled like a finished one (inbox_settle), which hands on what waits behind it.
--
-- KEYS[1]  the dead letters (`cmx:{q}:inbox:dead`, list, newest first)
-- ARGV[1]  the dead letter (JSON)
-- ARGV[2]  the dead letters kept at most    ARGV[3] how long they are kept after the last, s
-- Returns  the number of dead letters kept
redis.call('LPUSH', KEYS[1], ARGV[1])
redis.call('LTRIM', KEYS[1], 0, tonumber(ARGV[2]) - 1)
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[3]))
return redis.call('LLEN', KEYS[1])
