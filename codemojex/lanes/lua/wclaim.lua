-- wclaim: one rota step, then lease K = min(weight, depth, ceiling headroom) heads of that
-- one lane, in mint order, with one shared deadline.
--
-- KEYS[1]  the queue prefix `emq:{q}:`
-- KEYS[2]  `emq:{q}:seq`, declared so a Redis Cluster refuses the script mid-migration (facade.py)
-- ARGV[1]  lease in ms
-- Returns  {} or {room, lane, ring length after, then 6 fields per job: id, payload,
--          attempts, max_attempts, seq, enqueued_ms}
--- @include "serve"
return serve(ARGV[1], true)
