-- enqueue: admit a job into its lane; ring the lane / room on a false -> true transition.
-- A lane the lanes do not know (new, or forgotten by retain) is bound to the room; the
-- lane's entry in `lseen` and the room's in `rseen` become now (their last enqueue).
--
-- KEYS[1]  the queue prefix `emq:{q}:`
-- KEYS[2]  `emq:{q}:seq`, declared so a Redis Cluster refuses the script mid-migration (facade.py)
-- ARGV[1]  room id          ARGV[2]  lane id         ARGV[3]  job id
-- ARGV[4]  payload          ARGV[5]  max_attempts    ARGV[6]  max_depth (0 = none)
-- ARGV[7]  dedupe digest ('' = none)                 ARGV[8]  dedupe window in ms
-- Returns  {job id, 1} when admitted; {first job id, 0} for a dedupe hit or a job id that
--          already exists in that lane.
-- Errors   LANEERR (the lane is bound to another room, the job id is taken elsewhere),
--          LANEFULL (the lane holds max_depth pending jobs). Nothing is written then.
--- @include "admit_job"
local status, value = admit_job(ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5],
  tonumber(ARGV[6]), ARGV[7], ARGV[8])
if status == 'ok' then return {value, 1} end
if status == 'dup' then return {value, 0} end
if status == 'full' then return redis.error_reply('LANEFULL ' .. value) end
return redis.error_reply('LANEERR ' .. value)
