-- ack_wclaims: a consumer pool's round in one script call: ack_many of every batch its
-- consumers have finished, then up to N wclaims, one per consumer asking for work. N
-- claims here are N rota steps, exactly as N ack_wclaim calls one after another would be;
-- the pool pays one round trip for all of them instead of one per consumer.
-- Claiming stops at the first empty serve (the queue is paused or nothing is serviceable:
-- a further serve would find nothing either).
--
-- KEYS[1]  the queue prefix `emq:{q}:`
-- KEYS[2]  `emq:{q}:seq`, declared so a Redis Cluster refuses the script mid-migration (facade.py)
-- ARGV[1]  lease in ms      ARGV[2]  N, the batches wanted (>= 0)
-- ARGV[3..]  job id, attempts, job id, attempts, ... (may be none)
-- Returns  {acked, ring length after the last serve (0 when none served), then per batch:
--          F (its fields: 6 per job), room, lane, then F fields: id, payload, attempts,
--          max_attempts, seq, enqueued_ms per job}
--- @include "ack_pairs"
--- @include "serve"
local acked = ack_pairs(3)
local out = {acked, 0}
for _ = 1, tonumber(ARGV[2]) do
  local batch = serve(ARGV[1], true)
  if #batch == 0 then break end
  out[2] = batch[3]
  out[#out + 1] = #batch - 3
  out[#out + 1] = batch[1]
  out[#out + 1] = batch[2]
  for i = 4, #batch do out[#out + 1] = batch[i] end
end
return out
