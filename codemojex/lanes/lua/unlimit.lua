-- unlimit: drop a room's ceiling (the room may come back on the ring, with a wake).
--
-- KEYS[1]  the queue prefix `emq:{q}:`
-- KEYS[2]  `emq:{q}:seq`, declared so a Redis Cluster refuses the script mid-migration (facade.py)
-- ARGV[1]  room id
-- Returns  1 when a ceiling was removed, 0 when the room had none
--- @include "keys"
--- @include "room_recheck"
--- @include "room_serviceable"
local room = ARGV[1]
local before = room_serviceable(room)
local n = redis.call('HDEL', GLIMIT, room)
room_recheck(room, before)
return n
