-- pause_queue: stop every claim of the queue; rings and books are untouched.
--
-- KEYS[1]  the queue prefix `emq:{q}:`
-- KEYS[2]  `emq:{q}:seq`, declared so a Redis Cluster refuses the script mid-migration (facade.py)
-- ARGV     none
-- Returns  1 when newly paused, 0 when it already was
--- @include "keys"
return redis.call('SETNX', QPAUSED, '1')
