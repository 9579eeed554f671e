-- survey(deep): the whole keyspace of the queue read once, in the script's atomic view (check
-- and repair, admin verbs that may read everything).
-- every key of the queue, in one SCAN pass (SCAN walks the whole database, so once)
--- @include "keys"
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
  for _, where in ipairs({{'active', ACTIVE}, {'delayed', DELAYED}, {'dead', DEAD}}) do
    for _, id in ipairs(redis.call('ZRANGE', where[2], 0, -1)) do put(id, where[1]) end
  end
  for id in pairs(S.place) do
    -- either layout (job_get): check only reads; repair upgrades every job of the older one
    local f = redis.call('HMGET', job_key(id), 't', 'r', 'l', 's',
      'state', 'room', 'lane', 'seq')
    local old = not (f[1] or f[2] or f[3] or f[4])
    if old then f = {f[5], f[6], f[7], f[8]} end
    if f[1] or f[2] or f[3] or f[4] then
      S.jobs[id] = {state = f[1], room = f[2], lane = f[3], seq = tonumber(f[4]), old = old}
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
