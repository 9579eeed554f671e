-- Put a job back into its lane at its original seq (reap, promote).
--- @include "pend"
local function put_back(id, jk, room, lane, seq)
  redis.call('HSET', jk, 't', 'pending')
  pend(room, lane, id, seq)
end
