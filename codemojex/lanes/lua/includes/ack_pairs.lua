-- Complete the leased jobs given as (id, token) pairs in ARGV[first], ARGV[first + 1], ...;
-- stale tokens are skipped. The permits are given back per room, rooms in the order they
-- first appear. Returns how many were acked (ack_many, ack_wclaim, ack_wclaims).
--- @include "keys"
--- @include "permit_freed"
--- @include "holder"
local function ack_pairs(first)
  local ids, jks, seen = {}, {}, {}
  local freed, rooms = {}, {}
  for i = first, #ARGV, 2 do
    local id = ARGV[i]
    if not seen[id] then
      -- Only an acked id is marked: the same id may come first with a stale token and
      -- then with the live one (a lease that ran out and was claimed again).
      local jk, room = holder(id, ARGV[i + 1])
      if jk then
        seen[id] = true
        ids[#ids + 1] = id
        jks[#jks + 1] = jk
        if not freed[room] then
          freed[room] = 0
          rooms[#rooms + 1] = room
        end
        freed[room] = freed[room] + 1
      end
    end
  end
  if #ids == 0 then return 0 end
  redis.call('ZREM', ACTIVE, unpack(ids))
  redis.call('DEL', unpack(jks))
  for _, room in ipairs(rooms) do permit_freed(room, freed[room]) end
  return #ids
end
