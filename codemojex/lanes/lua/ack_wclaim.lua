-- ack_wclaim: ack_many of the batch a consumer has finished, then wclaim its next batch,
-- in one round trip (a consumer's loop costs one script call per batch instead of two).
-- The acks come first, so a permit they free can serve the same room again at once.
--
-- KEYS[1]  the queue prefix `emq:{q}:`
-- KEYS[2]  `emq:{q}:seq`, declared so a Redis Cluster refuses the script mid-migration (facade.py)
-- ARGV[1]  lease in ms      ARGV[2..]  job id, attempts, job id, attempts, ... (may be none)
-- Returns  {acked} when the queue is paused or nothing is serviceable, else
--          {acked, room, lane, ring length after, then 6 fields per job: id, payload,
--          attempts, max_attempts, seq, enqueued_ms} (as wclaim)
--- @include "ack_pairs"
--- @include "serve"
local acked = ack_pairs(2)
local out = serve(ARGV[1], true)
table.insert(out, 1, acked)
return out
