-- admit: enqueue a batch of jobs, each as enqueue does, under admission guards its producer
-- gives (conditions on keys of its own, outside the lanes' keyspace but in the queue's hash
-- slot), with its room's ceiling set first when the room has none. One call takes what a
-- producer has in hand (the bot: the guesses of one event-loop turn); each job is admitted
-- or refused on its own, none aborts another.
--
-- KEYS[1]  the queue prefix `emq:{q}:`
-- KEYS[2]  `emq:{q}:seq`, declared so a Redis Cluster refuses the script mid-migration (facade.py)
-- ARGV[1]  dedupe window in ms          ARGV[2]  the highest ceiling (ROOM.ceiling_max)
-- ARGV[3..] one record per job: its fields as netstrings run together ("<length>:<bytes>"
--          each; one argument a job, not thirty, is what keeps a producer's batch cheap to
--          send), 12 fields, then its guards and its notes:
--          room, lane, job id, payload, max_attempts, max_depth (0 = none),
--          dedupe digest ('' = none), ceiling (0 = none), ceiling source key ('' = none),
--          its field, the number of guards G, the number of notes K; then G guards of 4
--          fields (op, key, field, value):
--            'eq'   HGET key field must equal value
--            'nx'   HSETNX key field value, and the field must then equal value (the first
--                   writer's value stands)
--            'out'  SISMEMBER key field must be 0 (value unused)
--            'first' no member of the sorted set key scores below value (field unused): the
--                   job's origin is the oldest of its kind there (the bot: no older update
--                   of its order key is parked by another process)
--          then K notes of 3 fields (key, field, value): HSET when the job is admitted
-- Per job: a dedupe hit is reported first, whatever its guards say now (an update seen twice
-- makes one job and one answer): the dedupe key's, or a job of the same id in any lane (a
-- producer that derives the id from the job's origin needs no dedupe key: the job hash dedupes
-- while the job lives); then the guards, in order; then, when the room has no
-- ceiling and one is given, the room gets it (the source field's value when it holds a whole
-- number from 1 to the highest ceiling, else the one given); then the job as enqueue admits it.
-- Returns  4 values per job, in order: status ('ok', 'dup', 'full', 'guard', 'err'); the job
--          id (ok; dup: the first job's), why (full, err) or what the refusing guard found
--          (guard; '' for nothing); whether the room is paused (1/0); the 1-based index of
--          the refusing guard (else 0).
--- @include "keys"
--- @include "admit_job"
--- @include "job_lane"
--- @include "is_paused"
--- @include "room_recheck"
--- @include "room_serviceable"
local window, ceiling_max = ARGV[1], tonumber(ARGV[2])

-- A room without a ceiling gets one. Below its live count the room stays as serviceable as it
-- was, so nothing moves; at or above it (a room that ran uncapped, as many in flight as its
-- new ceiling: never on the steady path) the room leaves the ring as limit would take it off.
local function ceiling_if_none(room, ceiling, src, field)
  if ceiling <= 0 or redis.call('HEXISTS', GLIMIT, room) == 1 then return end
  if src ~= '' then
    local given = tonumber(redis.call('HGET', src, field) or '')
    if given and given >= 1 and given <= ceiling_max and given == math.floor(given) then
      ceiling = given
    end
  end
  local act = tonumber(redis.call('HGET', GACTIVE, room) or '0')
  if act < ceiling then
    redis.call('HSET', GLIMIT, room, ceiling)
    return
  end
  local before = room_serviceable(room)
  redis.call('HSET', GLIMIT, room, ceiling)
  room_recheck(room, before)
end

-- A record's fields (netstrings run together).
local function fields(record)
  local out, pos = {}, 1
  while pos <= #record do
    local colon = string.find(record, ':', pos, true)
    local size = tonumber(string.sub(record, pos, colon - 1))
    out[#out + 1] = string.sub(record, colon + 1, colon + size)
    pos = colon + size + 1
  end
  return out
end

-- The 1-based index of the first of the `n` guards in f[at], f[at + 1], ... that refuses,
-- and what it found; nil when all pass.
local function refused_by(f, at, n)
  for g = 1, n do
    local op, key, field, value = f[at], f[at + 1], f[at + 2], f[at + 3]
    at = at + 4
    local found
    if op == 'eq' then
      found = redis.call('HGET', key, field)
      if found ~= value then return g, found or '' end
    elseif op == 'nx' then
      redis.call('HSETNX', key, field, value)
      found = redis.call('HGET', key, field)
      if found ~= value then return g, found end
    elseif op == 'first' then
      found = redis.call('ZRANGEBYSCORE', key, '-inf', '(' .. value, 'LIMIT', 0, 1)[1]
      if found then return g, found end
    elseif redis.call('SISMEMBER', key, field) == 1 then
      return g, field
    end
  end
  return nil
end

local out = {}
for j = 3, #ARGV do
  local f = fields(ARGV[j])
  local room, lane, id, payload = f[1], f[2], f[3], f[4]
  local max_attempts, max_depth, digest = f[5], tonumber(f[6]), f[7]
  local ceiling, src, field = tonumber(f[8]), f[9], f[10]
  local guards, notes = tonumber(f[11]), tonumber(f[12])
  local first_note = 13 + 4 * guards
  local status, value, guard = nil, nil, 0
  if digest ~= '' then
    value = redis.call('GET', dedupe_key(digest))
    if value then status = 'dup' end
  end
  -- A job of this id in another lane is the same job too: a producer that derives ids from
  -- origins names the lane by a guard (the bot: the seat, `nx`), which a second producer that
  -- minted another lane for the same origin has not passed yet.
  if not status and job_lane(id) then status, value = 'dup', id end
  if not status then
    local g, found = refused_by(f, 13, guards)
    if g then
      status, value, guard = 'guard', found, g
    else
      ceiling_if_none(room, ceiling, src, field)
      status, value = admit_job(room, lane, id, payload, max_attempts, max_depth, digest, window,
        true)
      if status == 'ok' then
        for n = first_note, first_note + 3 * (notes - 1), 3 do
          redis.call('HSET', f[n], f[n + 1], f[n + 2])
        end
      end
    end
  end
  out[#out + 1] = status
  out[#out + 1] = value
  out[#out + 1] = is_paused(room) and 1 or 0
  out[#out + 1] = guard
end
return out
