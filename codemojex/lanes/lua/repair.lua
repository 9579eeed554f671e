-- repair: for an operator who suspects damage. Puts every job in exactly one place (a job
-- hash with no place goes back to its lane; an id with no hash is dropped), binds the lane
-- of every job that has one, recomputes every room's gactive from the leases in `active`
-- and every lane's ldelayed from `delayed`, rebuilds both rings from the lanes (keeps the
-- order, drops duplicates and what is not serviceable, appends what is missing) and the
-- rooms' held sets, puts every bound lane (only those) in lseen, and rewrites the operators'
-- books (npending, rdepth, lhead) from the pending zsets. No job is lost. And it upgrades
-- every job hash of the older layout to the short field names (upgrade_job), the one step
-- that does: run it once no worker of an older version serves the queue (operations.md). Admin
-- verb: it reads the whole queue, atomically.
--
-- KEYS[1]  the queue prefix `emq:{q}:`
-- KEYS[2]  `emq:{q}:seq`, declared so a Redis Cluster refuses the script mid-migration (facade.py)
-- ARGV     none
-- Returns  the list of fixes made, in order; empty when nothing needed fixing
--- @include "keys"
--- @include "books"
--- @include "count_jobs"
--- @include "held_lanes"
--- @include "job_get"
--- @include "lane_ok"
--- @include "room_serviceable"
--- @include "now_ms"
--- @include "sorted_keys"
--- @include "survey"
--- @include "upgrade_job"
--- @include "wake"
--- @include "zset_table"
local S = survey(true)
local fixed = {}
local function did(msg) fixed[#fixed + 1] = msg end
local now = now_ms()
local rank = {active = 1, pending = 2, delayed = 3, dead = 4}
local function unplace(id, p)
  if p.where == 'pending' then
    redis.call('ZREM', pending_key(p.lane), id)
  else
    redis.call('ZREM', P .. p.where, id)
  end
end
local function label(p) return p.where .. (p.lane and (' of lane ' .. p.lane) or '') end

-- one place per job
for _, id in ipairs(sorted_keys(S.place)) do
  local places, job = S.place[id], S.jobs[id]
  if not job then
    for _, p in ipairs(places) do
      unplace(id, p)
      did('dropped id ' .. id .. ' from ' .. label(p) .. ': it has no job hash')
    end
  else
    table.sort(places, function(a, b) return rank[a.where] < rank[b.where] end)
    for i = 2, #places do
      unplace(id, places[i])
      did('removed job ' .. id .. ' from ' .. label(places[i]) .. ', kept it in ' ..
        label(places[1]))
    end
    local p = places[1]
    local jk = job_key(id)
    if job.old then
      upgrade_job(jk)
      did('upgraded job ' .. id .. ' to the short field names')
    end
    if job.state ~= p.where then
      redis.call('HSET', jk, 't', p.where)
      did('set the state of job ' .. id .. ' to ' .. p.where .. ' (was ' ..
        tostring(job.state) .. ')')
    end
    if p.where == 'pending' then
      if job.lane ~= p.lane then
        redis.call('HSET', jk, 'l', p.lane)
        did('set the lane of job ' .. id .. ' to ' .. p.lane)
      end
      if job.seq and job.seq ~= p.score then
        redis.call('ZADD', pending_key(p.lane), job.seq, id)
        did('put job ' .. id .. ' back at its seq ' .. job.seq .. ' in lane ' .. p.lane)
      end
    end
  end
end
for _, id in ipairs(S.orphans) do
  local jk = job_key(id)
  local f, old = job_get(jk, 't', 'l', 's')
  if old then
    upgrade_job(jk)
    did('upgraded job ' .. id .. ' to the short field names')
  end
  if f[1] == 'dead' then
    redis.call('ZADD', DEAD, now, id)
    did('put job ' .. id .. ' back in dead')
  elseif f[1] == 'delayed' then
    redis.call('ZADD', DELAYED, now, id)
    did('put job ' .. id .. ' back in delayed, due now')
  elseif f[2] and f[3] then
    redis.call('HSET', jk, 't', 'pending')
    redis.call('ZADD', pending_key(f[2]), f[3], id)
    S.lanes[f[2]] = true
    did('put job ' .. id .. ' back in lane ' .. f[2] .. ' at its seq ' .. f[3])
  end
end

-- lane bindings (a lane with work but no room takes the room of its head job)
for _, lane in ipairs(sorted_keys(S.lanes)) do
  if not S.lroom[lane] then
    local head = redis.call('ZRANGE', pending_key(lane), 0, 0)[1]
    local room = head and job_get(job_key(head), 'r')[1]
    if room then
      redis.call('HSET', LROOM, lane, room)
      S.lroom[lane] = room
      S.rooms[room] = true
      S.room_lanes[room] = S.room_lanes[room] or {}
      S.room_lanes[room][lane] = true
      did('bound lane ' .. lane .. ' to room ' .. room)
    end
  end
end
-- the lane of a job in flight or delayed stays bound (it goes back to that lane)
local S2 = survey(false)
for _, id in ipairs(sorted_keys(S2.place)) do
  local job, p = S2.jobs[id], S2.place[id][1]
  if job and job.lane and job.room and (p.where == 'active' or p.where == 'delayed')
      and not S.lroom[job.lane] then
    redis.call('HSET', LROOM, job.lane, job.room)
    S.lroom[job.lane] = job.room
    S.rooms[job.room] = true
    S.room_lanes[job.room] = S.room_lanes[job.room] or {}
    S.room_lanes[job.room][job.lane] = true
    did('bound lane ' .. job.lane .. ' to room ' .. job.room .. ': its job ' .. id .. ' is ' ..
      p.where)
  end
end
for _, room in ipairs(sorted_keys(S.rooms)) do
  local lk = room_lanes_key(room)
  for _, lane in ipairs(redis.call('SMEMBERS', lk)) do
    if S.lroom[lane] ~= room then
      redis.call('SREM', lk, lane)
      did('unlisted lane ' .. lane .. ' from room ' .. room)
    end
  end
  for _, lane in ipairs(sorted_keys(S.room_lanes[room])) do
    if redis.call('SADD', lk, lane) == 1 then
      did('listed lane ' .. lane .. ' in room ' .. room)
    end
  end
end

for _, lane in ipairs(sorted_keys(S.lroom)) do
  if not S.seen[lane] then
    redis.call('ZADD', LSEEN, now, lane)
    did('put lane ' .. lane .. ' in lseen')
  end
end
for _, lane in ipairs(sorted_keys(S.seen)) do
  if not S.lroom[lane] then
    redis.call('ZREM', LSEEN, lane)
    did('removed lane ' .. lane .. ' from lseen: it is bound to no room')
  end
end

-- a counter hash holds `counts` for each of `names` (a zero count as no field)
local function recount(h, what, names, counts)
  for _, x in ipairs(names) do
    local stored = redis.call('HGET', h, x)
    local n = counts[x] or 0
    if tonumber(stored or '0') ~= n or (stored and n == 0) then
      if n == 0 then
        redis.call('HDEL', h, x)
      else
        redis.call('HSET', h, x, n)
      end
      did(string.sub(h, #P + 1) .. ' of ' .. what .. ' ' .. x .. ': ' .. tostring(stored) ..
        ' -> ' .. n)
    end
  end
end

-- ldelayed from `delayed`, gactive from the leases
local delayed = count_jobs(S2, 'delayed', 'lane')
local lanes = {}
for _, lane in ipairs(redis.call('HKEYS', LDELAYED)) do lanes[lane] = true end
for lane in pairs(delayed) do lanes[lane] = true end
recount(LDELAYED, 'lane', sorted_keys(lanes), delayed)
local counts = count_jobs(S2, 'active', 'room')
for room in pairs(counts) do S.rooms[room] = true end
recount(GACTIVE, 'room', sorted_keys(S.rooms), counts)

-- the operators' books from the pending zsets
local depth, heads, total = books(S2)
for _, book in ipairs({{RDEPTH, 'room', depth}, {LHEAD, 'lane', heads}}) do
  local key, what, want = book[1], book[2], book[3]
  local have = zset_table(key)
  for _, x in ipairs(sorted_keys(want)) do
    if have[x] ~= want[x] then
      redis.call('ZADD', key, want[x], x)
      did(string.sub(key, #P + 1) .. ' of ' .. what .. ' ' .. x .. ': ' .. tostring(have[x]) ..
        ' -> ' .. want[x])
    end
  end
  for _, x in ipairs(sorted_keys(have)) do
    if not want[x] then
      redis.call('ZREM', key, x)
      did('removed ' .. what .. ' ' .. x .. ' from ' .. string.sub(key, #P + 1) ..
        ': it has no pending job')
    end
  end
end
local stored = tonumber(redis.call('GET', NPENDING) or '0')
if stored ~= total then
  if total > 0 then redis.call('SET', NPENDING, total) else redis.call('DEL', NPENDING) end
  did('npending: ' .. stored .. ' -> ' .. total)
end

-- rebuild a ring: keep the order, drop duplicates and what `keep` refuses, append missing
local function rebuild(key, what, owner, keep, candidates)
  local old = redis.call('LRANGE', key, 0, -1)
  local new, seen = {}, {}
  for _, x in ipairs(old) do
    if seen[x] then
      did('removed a duplicate of ' .. what .. ' ' .. x .. ' from ' .. owner)
    elseif not keep(x) then
      seen[x] = true
      did('removed ' .. what .. ' ' .. x .. ' from ' .. owner .. ': not serviceable')
    else
      seen[x] = true
      new[#new + 1] = x
    end
  end
  for _, x in ipairs(candidates) do
    if not seen[x] and keep(x) then
      new[#new + 1] = x
      did('added missing ' .. what .. ' ' .. x .. ' to ' .. owner)
    end
  end
  local changed = #new ~= #old
  for i = 1, #new do if new[i] ~= old[i] then changed = true end end
  if changed then
    redis.call('DEL', key)
    if #new > 0 then redis.call('RPUSH', key, unpack(new)) end
  end
  return changed
end

for _, room in ipairs(sorted_keys(S.rooms)) do
  rebuild(lane_ring_key(room), 'lane', 'the lane ring of room ' .. room,
    function(lane) return S.lroom[lane] == room and lane_ok(lane) end,
    sorted_keys(S.room_lanes[room] or {}))
end
if rebuild(RING, 'room', 'the room ring', room_serviceable, sorted_keys(S.rooms)) then
  if redis.call('LLEN', RING) > 0 then wake() end
end

for _, room in ipairs(sorted_keys(S.rooms)) do
  local hk = room_held_key(room)
  local want = held_lanes(S, room)
  local have = redis.call('SMEMBERS', hk)
  table.sort(have)
  for _, lane in ipairs(have) do
    if want[lane] then
      want[lane] = nil
    else
      redis.call('SREM', hk, lane)
      did('removed lane ' .. lane .. ' from the held set of room ' .. room)
    end
  end
  for _, lane in ipairs(sorted_keys(want)) do
    redis.call('SADD', hk, lane)
    did('added lane ' .. lane .. ' to the held set of room ' .. room)
  end
end
return fixed
