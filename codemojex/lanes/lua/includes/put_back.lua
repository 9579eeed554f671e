-- Put a job back into its lane at its original seq (reap, promote), its state written in the
-- hash's layout (`old`: job_set).
--- @include "job_set"
--- @include "pend"
local function put_back(id, jk, room, lane, seq, old)
  job_set(jk, old, 't', 'pending')
  pend(room, lane, id, seq)
end
