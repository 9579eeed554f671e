-- Take for `me` the run of `key`'s parked updates no live process holds, oldest first (a
-- key's zset scores each by its update id): from the key's head on, those `me` holds already
-- passed over, stopping at one another live process holds (what waits behind it stays
-- behind it) or once `room` are taken. Each taken one is appended to `out` (update id,
-- record); returns how many were taken. `where` is the hash update id -> "<holder> <key>".
--- @include "keys"
local function inbox_run(parked, where, key, me, gone, room, out)
  local taken = 0
  for _, id in ipairs(redis.call('ZRANGE', inbox_key_key(key), 0, -1)) do
    local at = redis.call('HGET', where, id)
    local holder = at and string.match(at, '^(%S+) ') or '-'
    if holder ~= me then
      if not gone(holder) or taken >= room then break end
      redis.call('HSET', where, id, me .. ' ' .. key)
      redis.call('ZREM', inbox_held_key(holder), id)
      redis.call('ZADD', inbox_held_key(me), id, id)
      out[#out + 1] = id
      out[#out + 1] = redis.call('HGET', parked, id)
      taken = taken + 1
    end
  end
  return taken
end
