-- Admin verbs only: `lane` (of `room`) has no pending job any more: off its ring, or out of
-- its room's held set when it is paused.
--- @include "keys"
--- @include "is_paused"
--- @include "lane_unring"
local function lane_emptied(room, lane)
  if is_paused(lane) then
    redis.call('SREM', room_held_key(room), lane)
  else
    lane_unring(room, lane)
  end
end
