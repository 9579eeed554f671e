-- limit: set a room's ceiling. Lowering it to or below the live count takes the room off
-- the ring until it drains below the new ceiling; raising it may put the room back.
--
-- KEYS[1]  the queue prefix `emq:{q}:`
-- KEYS[2]  `emq:{q}:seq`, declared so a Redis Cluster refuses the script mid-migration (facade.py)
-- ARGV[1]  room id          ARGV[2]  ceiling (>= 1)
-- Returns  1
--- @include "keys"
--- @include "room_recheck"
--- @include "room_serviceable"
local room = ARGV[1]
local before = room_serviceable(room)
redis.call('HSET', GLIMIT, room, ARGV[2])
room_recheck(room, before)
return 1
