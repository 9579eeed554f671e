-- snapshot: what the /queue command, the CLI and the dashboard show: depths, in flight,
-- ceilings, weights, ring order, pauses. Admin verb. A room costs what its lanes with
-- pending jobs cost: they are its lane ring and its held set (paused lanes with work),
-- never the list of every lane the room has had.
--
-- KEYS[1]  the queue prefix `emq:{q}:`
-- KEYS[2]  `emq:{q}:seq`, declared so a Redis Cluster refuses the script mid-migration (facade.py)
-- ARGV[1]  one room id, or '' for every room the queue knows (that reads all of lroom)
-- Returns  {queue paused 0/1, room ring, #active, #delayed, #dead, rooms} where rooms is a
--          list of {room, paused 0/1, ceiling (-1 = none), in flight, lane ring, lanes}
--          and lanes a list of {lane, depth, weight, paused 0/1}, sorted by id: the room's
--          lanes holding pending jobs.
--- @include "keys"
local rooms = {}
if ARGV[1] ~= '' then
  rooms[1] = ARGV[1]
else
  local seen = {}
  local function see(r)
    if r and not seen[r] then seen[r] = true; rooms[#rooms + 1] = r end
  end
  local lr = redis.call('HGETALL', LROOM)
  for i = 2, #lr, 2 do see(lr[i]) end
  for _, h in ipairs({GLIMIT, GACTIVE}) do
    local fields = redis.call('HKEYS', h)
    for _, r in ipairs(fields) do see(r) end
  end
  for _, x in ipairs(redis.call('SMEMBERS', PAUSED)) do
    if string.sub(x, 1, 3) == 'ROM' then see(x) end
  end
  table.sort(rooms)
end
local out_rooms = {}
for _, room in ipairs(rooms) do
  local ring = redis.call('LRANGE', lane_ring_key(room), 0, -1)
  local lanes = redis.call('SMEMBERS', room_held_key(room))
  for _, lane in ipairs(ring) do lanes[#lanes + 1] = lane end
  table.sort(lanes)
  local out_lanes = {}
  for _, lane in ipairs(lanes) do
    out_lanes[#out_lanes + 1] = {lane, redis.call('ZCARD', pending_key(lane)),
      tonumber(redis.call('HGET', GWEIGHT, lane) or '1'),
      redis.call('SISMEMBER', PAUSED, lane)}
  end
  out_rooms[#out_rooms + 1] = {room, redis.call('SISMEMBER', PAUSED, room),
    tonumber(redis.call('HGET', GLIMIT, room) or '-1'),
    tonumber(redis.call('HGET', GACTIVE, room) or '0'),
    ring, out_lanes}
end
return {redis.call('EXISTS', QPAUSED), redis.call('LRANGE', RING, 0, -1),
  redis.call('ZCARD', ACTIVE), redis.call('ZCARD', DELAYED),
  redis.call('ZCARD', DEAD), out_rooms}
