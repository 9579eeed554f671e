-- card_close: a round ended (won, timed out, ended by an admin): the card stops taking
-- guesses for it. The generation is bumped whether or not the card is there, so that a
-- writer that read the database before the round ended cannot write the round back as open.
--
-- KEYS[1]  the card (`cmx:{q}:card:<room>`)            KEYS[2]  its generation
-- ARGV[1]  the round id                                ARGV[2]  the generation's time to live (s)
-- Returns  1 when the card was taking guesses for that round (now none), else 0
redis.call('INCR', KEYS[2])
redis.call('EXPIRE', KEYS[2], ARGV[2])
if redis.call('HGET', KEYS[1], 'round') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'round', '0')
redis.call('HDEL', KEYS[1], 'palette', 'length', 'repeats', 'expires')
return 1
