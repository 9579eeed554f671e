-- a zset's members and scores as a table
local function zset_table(key)
  local kv = redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')
  local out = {}
  for i = 1, #kv, 2 do out[kv[i]] = tonumber(kv[i + 1]) end
  return out
end
