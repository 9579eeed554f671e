-- A lane's jobs waiting in `delayed` are counted, so retain can tell a lane with none.
--- @include "keys"
local function delayed_added(lane) redis.call('HINCRBY', LDELAYED, lane, 1) end
