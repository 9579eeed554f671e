-- claim: one rota step (room ring, then the room's lane ring) and lease the lane's head.
--
-- KEYS[1]  the queue prefix `emq:{q}:`
-- KEYS[2]  `emq:{q}:seq`, declared so a Redis Cluster refuses the script mid-migration (facade.py)
-- ARGV[1]  lease in ms (deadline = server TIME + lease)
-- Returns  {} when the queue is paused or nothing is serviceable, else
--          {room, lane, 0, id, payload, attempts, max_attempts, seq,
--          enqueued_ms}; attempts (already incremented) is the fencing token.
--- @include "serve"
return serve(ARGV[1], false)
