-- waiting: which of some rooms still hold a job enqueued before a moment of their own, pending
-- (the room's oldest pending job, includes/room_oldest.lua), in flight (a lease in `active`) or waiting for
-- a retry (`delayed`). The round timer asks it about rounds past
-- their deadline: a round stays open while guesses taken before its deadline wait (a job keeps
-- its enqueued_ms through retries and reaps). Costs the given rooms' lanes with work, the
-- leases (at most one per busy consumer) and the delayed jobs (none but during and after an
-- outage), never every room.
--
-- KEYS[1]  the queue prefix `emq:{q}:`
-- KEYS[2]  `emq:{q}:seq`, declared so a Redis Cluster refuses the script mid-migration (facade.py)
-- ARGV     room id, moment in ms, room id, moment in ms, ...
-- Returns  {the server's time in ms, then per room in the order given: 1 when it holds a job
--          enqueued before its moment, else 0}
--- @include "keys"
--- @include "now_ms"
--- @include "room_oldest"
--- @include "job_get"
local before, order, open = {}, {}, 0
for i = 1, #ARGV, 2 do
  local room = ARGV[i]
  order[#order + 1] = room
  if not before[room] then open = open + 1 end
  before[room] = tonumber(ARGV[i + 1])
end
local found = {}
for room, moment in pairs(before) do
  local at = room_oldest(room)
  if at >= 0 and at < moment then
    found[room] = true
    open = open - 1
  end
end
for _, set in ipairs({ACTIVE, DELAYED}) do
  if open == 0 then break end
  for _, id in ipairs(redis.call('ZRANGE', set, 0, -1)) do
    local f = job_get(job_key(id), 'r', 'e')
    local moment = f[1] and before[f[1]]
    if moment and not found[f[1]] and tonumber(f[2] or '-1') < moment then
      found[f[1]] = true
      open = open - 1
      if open == 0 then break end
    end
  end
end
local out = {now_ms()}
for _, room in ipairs(order) do out[#out + 1] = found[room] and 1 or 0 end
return out
