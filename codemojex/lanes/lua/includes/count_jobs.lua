-- jobs in `where` per `field` of their hashes ('room' or 'lane'): gactive counts the
-- leases per room, ldelayed the delayed jobs per lane
local function count_jobs(S, where, field)
  local counts = {}
  for id, places in pairs(S.place) do
    local job = S.jobs[id]
    for _, p in ipairs(places) do
      if p.where == where and job and job[field] then
        counts[job[field]] = (counts[job[field]] or 0) + 1
      end
    end
  end
  return counts
end
