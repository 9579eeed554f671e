-- card_write: a room's card as the database has it (with its seats and bans), written only
-- when its generation is still the one its writer read before reading the database; the
-- generation is then bumped. A writer that read the database before some change of the
-- room can therefore never put the older state back over the newer.
--
-- KEYS[1]  the chat's room (`cmx:{q}:room:<chat>:<thread>`)
-- KEYS[2]  the card (`cmx:{q}:card:<room>`)          KEYS[3]  its generation
-- KEYS[4]  the room's seats (user -> player)           KEYS[5]  the room's banned users
-- KEYS[6]  the room's players' names
-- Every key written gets the time to live, the seats and the names too: they are created here
-- (with an empty field, '', that no user or player id can be) because a guess's admission
-- adds to them afterwards (admit.lua: a new player's seat, HSETNX; a name, HSET), and a hash
-- that admission created would have none.
-- ARGV[1]  the generation read (0: none)   ARGV[2]  every key's time to live (s)
-- ARGV[3]  the room id
-- ARGV[4]  F, then F field/value pairs of the card; then S, then S user/player pairs of
--          the seats (the database's ids win over those held); then the banned users
-- Returns  1 when written, 0 when the generation had moved (nothing written)
if tonumber(redis.call('GET', KEYS[3]) or '0') ~= tonumber(ARGV[1]) then return 0 end
-- ARGV[first..last] to `command` on `key`, a thousand at a time (Lua's unpack takes a few
-- thousand values at most; a room may have had more players)
local function each_chunk(command, key, first, last, step)
  for i = first, last, 1000 * step do
    redis.call(command, key, unpack(ARGV, i, math.min(last, i + 1000 * step - 1)))
  end
end
local ttl = ARGV[2]
redis.call('INCR', KEYS[3])
redis.call('EXPIRE', KEYS[3], ttl)
redis.call('SET', KEYS[1], ARGV[3], 'EX', ttl)
redis.call('DEL', KEYS[2], KEYS[5])
local at = 4
local fields = tonumber(ARGV[at])
redis.call('HSET', KEYS[2], unpack(ARGV, at + 1, at + 2 * fields))
redis.call('EXPIRE', KEYS[2], ttl)
at = at + 2 * fields + 1
local seats = tonumber(ARGV[at])
redis.call('HSET', KEYS[4], '', '')
each_chunk('HSET', KEYS[4], at + 1, at + 2 * seats, 2)
redis.call('EXPIRE', KEYS[4], ttl)
at = at + 2 * seats + 1
each_chunk('SADD', KEYS[5], at, #ARGV, 1)
redis.call('EXPIRE', KEYS[5], ttl)
redis.call('HSET', KEYS[6], '', '')
redis.call('EXPIRE', KEYS[6], ttl)
return 1
