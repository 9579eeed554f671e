-- ack_many: complete a batch of leased jobs in one round trip; stale tokens are skipped.
-- The permits are given back per room, rooms in the order they first appear in the batch.
--
-- KEYS[1]  the queue prefix `emq:{q}:`
-- KEYS[2]  `emq:{q}:seq`, declared so a Redis Cluster refuses the script mid-migration (facade.py)
-- ARGV     job id, attempts, job id, attempts, ...
-- Returns  how many were acked
--- @include "ack_pairs"
return ack_pairs(1)
