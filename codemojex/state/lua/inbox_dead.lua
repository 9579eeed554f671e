-- inbox_dead: an update that cannot be handled (it cannot be read, or its handler failed
-- with a bug every try) goes to the dead letters, so that it is confirmed to Telegram and
-- never holds its chat again; the operator sees them on the ops page.
--
-- KEYS[1]  the parked updates (`cmx:{q}:inbox:parked`)
-- KEYS[2]  their leases (`cmx:{q}:inbox:lease`)
-- KEYS[3]  the dead letters (`cmx:{q}:inbox:dead`, list, newest first)
-- ARGV[1]  the update id    ARGV[2] the dead letter (JSON)
-- ARGV[3]  the dead letters kept at most    ARGV[4] how long they are kept after the last, s
-- Returns  the number of dead letters kept
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('LPUSH', KEYS[3], ARGV[2])
redis.call('LTRIM', KEYS[3], 0, tonumber(ARGV[3]) - 1)
redis.call('EXPIRE', KEYS[3], tonumber(ARGV[4]))
return redis.call('LLEN', KEYS[3])
