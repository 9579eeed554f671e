-- card_read: a room's card, with what a guess needs of one user, in one atomic read.
--
-- KEYS[1]  the chat's room (`cmx:{q}:room:<chat>:<thread>`)
-- KEYS[2]  the queue's card prefix (`cmx:{q}:card:`): the keys of a room found through
--          KEYS[1] cannot be declared beforehand, so they are built from it (same slot)
-- ARGV[1]  the room id, or '' to find it through KEYS[1]
-- ARGV[2]  the Telegram user, or '' for none
-- Returns  {room id ('' when unknown), the card (HGETALL: fields and values, {} when
--          absent), its generation (0 when none), the user's player id ('' when none),
--          1 when the user is banned in the room else 0}
local room = ARGV[1]
if room == '' then room = redis.call('GET', KEYS[1]) or '' end
if room == '' then return {'', {}, 0, '', 0} end
local card = KEYS[2] .. room
local seat, banned = '', 0
if ARGV[2] ~= '' then
  seat = redis.call('HGET', card .. ':seats', ARGV[2]) or ''
  banned = redis.call('SISMEMBER', card .. ':bans', ARGV[2])
end
local gen = tonumber(redis.call('GET', card .. ':gen') or '0')
return {room, redis.call('HGETALL', card), gen, seat, banned}
