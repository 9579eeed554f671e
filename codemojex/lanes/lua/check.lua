-- check: every violated invariant of lanes.md, read from the raw keys (admin verb: it reads
-- the whole queue, atomically).
--
-- KEYS[1]  the queue prefix `emq:{q}:`
-- KEYS[2]  `emq:{q}:seq`, declared so a Redis Cluster refuses the script mid-migration (facade.py)
-- ARGV[1]  '1' = deep: also SCAN the database for keys nothing in the queue leads to
--          (orphan job hashes and the like); '0' = only what the queue's books reach
-- Returns  a sorted list of human-readable problems; empty when the queue is sound
--- @include "keys"
--- @include "books"
--- @include "count_jobs"
--- @include "held_lanes"
--- @include "is_paused"
--- @include "lane_ok"
--- @include "room_block"
--- @include "survey"
--- @include "zset_table"
local S = survey(ARGV[1] == '1')
local bad = {}
local function say(msg) bad[#bad + 1] = msg end

-- invariant 4 (one place, state says which) and 5 (pending score = mint seq)
local counter = tonumber(redis.call('GET', SEQ) or '0')
for id, places in pairs(S.place) do
  local job = S.jobs[id]
  if #places > 1 then
    local names = {}
    for _, p in ipairs(places) do
      names[#names + 1] = p.where .. (p.lane and (' of lane ' .. p.lane) or '')
    end
    table.sort(names)
    say('job ' .. id .. ' is in ' .. #places .. ' places: ' .. table.concat(names, ', '))
  end
  for _, p in ipairs(places) do
    local where = p.where .. (p.lane and (' of lane ' .. p.lane) or '')
    if not job then
      say('job ' .. id .. ' is in ' .. where .. ' but has no job hash')
    else
      if job.state ~= p.where then
        say('job ' .. id .. ' is in ' .. where .. ' but its state is ' .. tostring(job.state))
      end
      if p.where == 'pending' then
        if job.lane ~= p.lane then
          say('job ' .. id .. ' is pending in lane ' .. p.lane .. ' but its lane is ' ..
            tostring(job.lane))
        end
        if job.seq ~= p.score then
          say('job ' .. id .. ' is pending at score ' .. p.score .. ' but its seq is ' ..
            tostring(job.seq))
        end
        if S.lroom[p.lane] ~= job.room then
          say('job ' .. id .. ' of room ' .. tostring(job.room) .. ' is pending in lane ' ..
            p.lane .. ' bound to room ' .. tostring(S.lroom[p.lane]))
        end
      end
    end
  end
  if job and job.seq and job.seq > counter then
    say('job ' .. id .. ' has seq ' .. job.seq .. ' above the seq counter ' .. counter)
  end
end
for _, id in ipairs(S.orphans) do
  say('job ' .. id .. ' has a job hash but is in no lane, active, delayed or dead')
end

-- lane bindings
for lane in pairs(S.lanes) do
  if not S.lroom[lane] and redis.call('EXISTS', pending_key(lane)) == 1 then
    say('lane ' .. lane .. ' has pending jobs but no room in lroom')
  end
end
for room in pairs(S.rooms) do
  local members = redis.call('SMEMBERS', room_lanes_key(room))
  local listed = {}
  for _, lane in ipairs(members) do
    listed[lane] = true
    if S.lroom[lane] ~= room then
      say('lane ' .. lane .. ' is listed in room ' .. room .. ' but bound to room ' ..
        tostring(S.lroom[lane]))
    end
  end
  for lane in pairs(S.room_lanes[room]) do
    if not listed[lane] then
      say('lane ' .. lane .. ' is bound to room ' .. room .. ' but not listed in its lanes')
    end
  end
end

-- invariant 6: the lanes the queue remembers are bound, listed and in lseen, and so is
-- the lane of every job pending (above), in flight or delayed
for lane, room in pairs(S.lroom) do
  if not S.seen[lane] then
    say('lane ' .. lane .. ' is bound to room ' .. room .. ' but has no entry in lseen')
  end
end
for lane in pairs(S.seen) do
  if not S.lroom[lane] then say('lane ' .. lane .. ' is in lseen but bound to no room') end
end
for id, places in pairs(S.place) do
  local job = S.jobs[id]
  for _, p in ipairs(places) do
    if job and job.lane and (p.where == 'active' or p.where == 'delayed')
        and S.lroom[job.lane] ~= job.room then
      say('job ' .. id .. ' of room ' .. tostring(job.room) .. ' is ' .. p.where ..
        ' but its lane ' .. job.lane .. ' is bound to room ' .. tostring(S.lroom[job.lane]))
    end
  end
end
local delayed = count_jobs(S, 'delayed', 'lane')
local ldelayed = {}
local kv = redis.call('HGETALL', LDELAYED)
for i = 1, #kv, 2 do ldelayed[kv[i]] = kv[i + 1] end
for lane, v in pairs(ldelayed) do
  if tonumber(v) ~= (delayed[lane] or 0) then
    say('ldelayed of lane ' .. lane .. ' is ' .. v .. ' but the lane has ' ..
      (delayed[lane] or 0) .. ' jobs in delayed')
  end
end
for lane, n in pairs(delayed) do
  if not ldelayed[lane] then
    say('lane ' .. lane .. ' has ' .. n .. ' jobs in delayed but no ldelayed entry')
  end
end
for room in pairs(S.rooms) do
  local want = held_lanes(S, room)
  for _, lane in ipairs(redis.call('SMEMBERS', room_held_key(room))) do
    if not want[lane] then
      say('lane ' .. lane .. ' is in the held set of room ' .. room ..
        ' but is not a paused lane of the room with pending jobs')
    end
    want[lane] = nil
  end
  for lane in pairs(want) do
    say('lane ' .. lane .. ' is paused with pending jobs but missing from the held set of room '
      .. room)
  end
end

-- invariant 3: gactive = leases per room
local counts = count_jobs(S, 'active', 'room')
for room in pairs(S.rooms) do
  local stored = redis.call('HGET', GACTIVE, room)
  local n = counts[room] or 0
  if tonumber(stored or '0') ~= n then
    say('gactive of room ' .. room .. ' is ' .. tostring(stored) .. ' but the room has ' ..
      n .. ' jobs in active')
  end
end
for room in pairs(counts) do
  if not S.rooms[room] then
    say('room ' .. room .. ' has ' .. counts[room] .. ' jobs in active but no gactive entry')
  end
end
for _, h in ipairs({GLIMIT, GWEIGHT}) do
  local kv = redis.call('HGETALL', h)
  for i = 1, #kv, 2 do
    local v = tonumber(kv[i + 1])
    if not v or v < 1 or v ~= math.floor(v) then
      say(string.sub(h, #P + 1) .. ' of ' .. kv[i] .. ' is not a positive integer: ' .. kv[i + 1])
    end
  end
end

-- invariant 1: lane rings
for room in pairs(S.rooms) do
  local ring = redis.call('LRANGE', lane_ring_key(room), 0, -1)
  local seen = {}
  for _, lane in ipairs(ring) do
    seen[lane] = (seen[lane] or 0) + 1
  end
  for lane, n in pairs(seen) do
    if n > 1 then
      say('lane ' .. lane .. ' appears ' .. n .. ' times on the lane ring of room ' .. room)
    end
    if S.lroom[lane] ~= room then
      say('lane ' .. lane .. ' is on the lane ring of room ' .. room .. ' but belongs to room ' ..
        tostring(S.lroom[lane]))
    elseif is_paused(lane) then
      say('lane ' .. lane .. ' is on the lane ring of room ' .. room .. ' but is paused')
    elseif redis.call('ZCARD', pending_key(lane)) == 0 then
      say('lane ' .. lane .. ' is on the lane ring of room ' .. room .. ' but has no pending job')
    end
  end
  for lane in pairs(S.room_lanes[room]) do
    if not seen[lane] and lane_ok(lane) then
      say('lane ' .. lane .. ' is serviceable but missing from the lane ring of room ' .. room)
    end
  end
end

-- invariant 2: the room ring
local seen = {}
for _, room in ipairs(redis.call('LRANGE', RING, 0, -1)) do
  seen[room] = (seen[room] or 0) + 1
end
for room, n in pairs(seen) do
  if n > 1 then say('room ' .. room .. ' appears ' .. n .. ' times on the room ring') end
end
for room in pairs(S.rooms) do
  local why = room_block(S, room, counts[room] or 0)
  if seen[room] and why then
    say('room ' .. room .. ' is on the room ring but is not serviceable: ' .. why)
  elseif not seen[room] and not why then
    say('room ' .. room .. ' is serviceable but missing from the room ring')
  end
end

-- the operators' books: npending, rdepth and lhead agree with the pending zsets
local depth, heads, total = books(S)
local stored = tonumber(redis.call('GET', NPENDING) or '0')
if stored ~= total then
  say('npending is ' .. stored .. ' but ' .. total .. ' jobs are pending')
end
for _, book in ipairs({{RDEPTH, 'room', depth}, {LHEAD, 'lane', heads}}) do
  local key, what, want = book[1], book[2], book[3]
  local have = zset_table(key)
  for x, v in pairs(want) do
    if have[x] ~= v then
      say(string.sub(key, #P + 1) .. ' of ' .. what .. ' ' .. x .. ' is ' .. tostring(have[x]) ..
        ' but should be ' .. v)
    end
  end
  for x, v in pairs(have) do
    if not want[x] then
      say(string.sub(key, #P + 1) .. ' of ' .. what .. ' ' .. x .. ' is ' .. v ..
        ' but it has no pending job')
    end
  end
end

local wakes = redis.call('LLEN', WAKE)
if wakes > 64 then say('the wake list holds ' .. wakes .. ' tokens (cap 64)') end
table.sort(bad)
return bad
