-- Whether a holder of parked updates is gone, for the caller `me` (never gone to itself):
-- '-' holds what waits behind a key (gone: whoever takes the key takes it); a holder whose
-- lease (`holders`, zset: holder -> lease's end, ms) ran out or was dropped is gone; with a
-- poller's `fence` (> 0), so is every holder stamped with a lower fence (`fences`, hash:
-- holder -> fence): the poller that took over from it takes what it held at once.
local function inbox_dead_holder(holders, fences, me, fence, now)
  return function(holder)
    if holder == '-' then return true end
    if holder == me then return false end
    local until_ms = redis.call('ZSCORE', holders, holder)
    if not until_ms or tonumber(until_ms) < now then return true end
    if fence > 0 then
      local theirs = redis.call('HGET', fences, holder)
      if theirs and tonumber(theirs) < fence then return true end
    end
    return false
  end
end
