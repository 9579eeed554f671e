-- purge: move every pending job of a lane to `dead` (a banned player). Jobs in flight or
-- delayed are left alone.
--
-- KEYS[1]  the queue prefix `emq:{q}:`
-- KEYS[2]  `emq:{q}:seq`, declared so a Redis Cluster refuses the script mid-migration (facade.py)
-- ARGV[1]  lane id
-- Returns  how many jobs were purged
--- @include "keys"
--- @include "lane_emptied"
--- @include "now_ms"
--- @include "pending_changed"
--- @include "job_get"
--- @include "job_set"
local lane = ARGV[1]
local pk = pending_key(lane)
local ids = redis.call('ZRANGE', pk, 0, -1)
if #ids == 0 then return 0 end
local room = redis.call('HGET', LROOM, lane)
local now = now_ms()
local n = 0
for _, id in ipairs(ids) do
  local jk = job_key(id)
  local f, old = job_get(jk, 't')
  if f[1] then
    job_set(jk, old, 't', 'dead', 'x', 'purged')
    redis.call('ZADD', DEAD, now, id)
    n = n + 1
  end
end
redis.call('DEL', pk)
redis.call('ZREM', LHEAD, lane)
if room then
  pending_changed(room, -#ids)
  lane_emptied(room, lane)
end
return n
