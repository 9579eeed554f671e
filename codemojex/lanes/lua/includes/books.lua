-- the operators' books as the pending zsets say they should be: pending jobs per room, each
-- lane's head seq, and the total (check compares, repair rewrites)
local function books(S)
  local depth, heads, total = {}, {}, 0
  for id, places in pairs(S.place) do
    for _, p in ipairs(places) do
      if p.where == 'pending' then
        total = total + 1
        local room = S.lroom[p.lane] or (S.jobs[id] and S.jobs[id].room)
        if room then depth[room] = (depth[room] or 0) + 1 end
        -- by seq, which repair restores as the score (a damaged score is named elsewhere)
        local seq = (S.jobs[id] and S.jobs[id].seq) or p.score
        if not heads[p.lane] or seq < heads[p.lane] then heads[p.lane] = seq end
      end
    end
  end
  return depth, heads, total
end
