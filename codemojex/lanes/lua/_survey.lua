-- _survey.lua: prepended to check and repair only (admin verbs that may read everything).
-- survey() reads the whole keyspace of the queue once, in the script's atomic view.

-- every key of the queue, in one SCAN pass (SCAN walks the whole database, so once)
local function scan_queue()
  local keys = {}
  local cursor = '0'
  repeat
    local r = redis.call('SCAN', cursor, 'MATCH', P .. '*', 'COUNT', 1000)
    cursor = r[1]
    for _, k in ipairs(r[2]) do keys[#keys + 1] = k end
  until cursor == '0'
  return keys
end

local function sorted_keys(set)
  local out = {}
  for k in pairs(set) do out[#out + 1] = k end
  table.sort(out)
  return out
end

-- deep: also SCAN for keys the queue's own books do not lead to (orphan job hashes, a
-- pending zset of an unbound lane, a ring of an unknown room); costs a pass over the db.
local function survey(deep)
  local S = {lroom = {}, lanes = {}, rooms = {}, place = {}, jobs = {}, orphans = {},
    active_count = {}, room_lanes = {}, seen = {}}
  local plen = #P
  local found_jobs = {}
  local lr = redis.call('HGETALL', LROOM)
  for i = 1, #lr, 2 do
    S.lroom[lr[i]] = lr[i + 1]
    S.lanes[lr[i]] = true
    S.rooms[lr[i + 1]] = true
  end
  for _, lane in ipairs(redis.call('ZRANGE', LSEEN, 0, -1)) do
    S.seen[lane] = true
    S.lanes[lane] = true
  end
  if deep then
    for _, k in ipairs(scan_queue()) do
      local rest = string.sub(k, plen + 1)
      local kind = string.sub(rest, 1, 2)
      if kind == 'jo' and string.sub(rest, 1, 4) == 'job:' then
        found_jobs[#found_jobs + 1] = string.sub(rest, 5)
      elseif kind == 'g:' and string.sub(rest, -8) == ':pending' then
        S.lanes[string.sub(rest, 3, -9)] = true
      elseif kind == 'r:' and string.sub(rest, -5) == ':ring' then
        S.rooms[string.sub(rest, 3, -6)] = true
      elseif kind == 'r:' and string.sub(rest, -6) == ':lanes' then
        S.rooms[string.sub(rest, 3, -7)] = true
      elseif kind == 'r:' and string.sub(rest, -5) == ':held' then
        S.rooms[string.sub(rest, 3, -6)] = true
      end
    end
  end
  for _, h in ipairs({GLIMIT, GACTIVE}) do
    for _, r in ipairs(redis.call('HKEYS', h)) do S.rooms[r] = true end
  end
  for _, r in ipairs(redis.call('LRANGE', RING, 0, -1)) do S.rooms[r] = true end
  for _, x in ipairs(redis.call('SMEMBERS', PAUSED)) do
    if string.sub(x, 1, 3) == 'ROM' then S.rooms[x] = true end
  end
  for room in pairs(S.rooms) do
    S.room_lanes[room] = {}
  end
  for lane, room in pairs(S.lroom) do S.room_lanes[room][lane] = true end

  local function put(id, where, lane, score)
    local p = S.place[id]
    if not p then p = {}; S.place[id] = p end
    p[#p + 1] = {where = where, lane = lane, score = score}
  end
  for lane in pairs(S.lanes) do
    local z = redis.call('ZRANGE', pending_key(lane), 0, -1, 'WITHSCORES')
    for i = 1, #z, 2 do put(z[i], 'pending', lane, tonumber(z[i + 1])) end
  end
  for _, where in ipairs({'active', 'delayed', 'dead'}) do
    for _, id in ipairs(redis.call('ZRANGE', P .. where, 0, -1)) do put(id, where) end
  end
  for id in pairs(S.place) do
    local f = redis.call('HMGET', job_key(id), 'state', 'room', 'lane', 'seq')
    if f[1] or f[2] or f[3] or f[4] then
      S.jobs[id] = {state = f[1], room = f[2], lane = f[3], seq = tonumber(f[4])}
    else
      S.jobs[id] = false
    end
  end
  for _, id in ipairs(found_jobs) do
    if not S.place[id] then S.orphans[#S.orphans + 1] = id end
  end
  table.sort(S.orphans)
  return S
end

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

-- the lanes of `room` that belong in its held set: paused, with pending jobs
local function held_lanes(S, room)
  local out = {}
  for lane in pairs(S.room_lanes[room] or {}) do
    if is_paused(lane) and redis.call('ZCARD', pending_key(lane)) > 0 then out[lane] = true end
  end
  return out
end

local function lane_ok(lane)
  return redis.call('ZCARD', pending_key(lane)) > 0 and not is_paused(lane)
end

-- why a room is not serviceable given the true in-flight count; nil when it is
local function room_block(S, room, act)
  if is_paused(room) then return 'paused' end
  local lim = redis.call('HGET', GLIMIT, room)
  if lim and act >= tonumber(lim) then
    return 'at its ceiling (' .. act .. ' in flight, ceiling ' .. lim .. ')'
  end
  for lane in pairs(S.room_lanes[room] or {}) do
    if lane_ok(lane) then return nil end
  end
  return 'no serviceable lane'
end

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

-- a zset's members and scores as a table
local function zset_table(key)
  local kv = redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')
  local out = {}
  for i = 1, #kv, 2 do out[kv[i]] = tonumber(kv[i + 1]) end
  return out
end
