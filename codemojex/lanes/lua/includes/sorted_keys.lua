-- the keys of a table, sorted (repair's fixes come out in a stable order)
local function sorted_keys(set)
  local out = {}
  for k in pairs(set) do out[#out + 1] = k end
  table.sort(out)
  return out
end
