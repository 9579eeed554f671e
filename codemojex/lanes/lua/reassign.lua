-- reassign: move a pending job to another lane of the same room, keeping its seq (so it
-- keeps its place in mint order). A lane of another room is refused.
--
-- KEYS[1]  the queue prefix `emq:{q}:`
-- KEYS[2]  `emq:{q}:seq`, declared so a Redis Cluster refuses the script mid-migration (facade.py)
-- ARGV[1]  job id           ARGV[2]  target lane id
-- Returns  1 when the job is now pending in the target lane, 0 when the job is not pending
-- Errors   LANEERR when the target lane belongs to another room (nothing is written)
--- @include "keys"
--- @include "bind"
--- @include "head_changed"
--- @include "lane_emptied"
--- @include "now_ms"
--- @include "pend"
--- @include "pending_changed"
--- @include "job_get"
--- @include "job_set"
local id, target = ARGV[1], ARGV[2]
local jk = job_key(id)
local f, old = job_get(jk, 't', 'r', 'l', 's')
if not f[1] then return 0 end
local room, lane = f[2], f[3]
local bound = redis.call('HGET', LROOM, target)
if bound and bound ~= room then
  return redis.error_reply('LANEERR cannot reassign job ' .. id .. ' of room ' .. room ..
    ' to lane ' .. target .. ' of room ' .. bound)
end
if f[1] ~= 'pending' then return 0 end
if lane == target then return 1 end
if not bound then bind(room, target) end
redis.call('ZADD', LSEEN, now_ms(), target)
local pk = pending_key(lane)
redis.call('ZREM', pk, id)
pending_changed(room, -1)
if not head_changed(lane) then lane_emptied(room, lane) end
job_set(jk, old, 'l', target)
pend(room, target, id, f[4])
return 1
