-- card_read: a room's card, with what a guess needs of one user, in one atomic read.
--
-- KEYS[1]  the prefix `cmx:{q}:` (names no key): the keys of a room found through KEYS[2]
--          cannot be declared beforehand, so they are built on it (same slot: state/keys.py)
-- KEYS[2]  the chat's room (`cmx:{q}:room:<chat>:<thread>`)
-- ARGV[1]  the room id, or '' to find it through KEYS[2]
-- ARGV[2]  the Telegram user, or '' for none
-- Returns  {room id ('' when unknown), the card (HGETALL: fields and values, {} when
--          absent), its generation (0 when none), the user's player id ('' when none),
--          1 when the user is banned in the room else 0}
--- @include "keys"
local room = ARGV[1]
if room == '' then room = redis.call('GET', KEYS[2]) or '' end
if room == '' then return {'', {}, 0, '', 0} end
local seat, banned = '', 0
if ARGV[2] ~= '' then
  seat = redis.call('HGET', seats_key(room), ARGV[2]) or ''
  banned = redis.call('SISMEMBER', bans_key(room), ARGV[2])
end
local gen = tonumber(redis.call('GET', card_gen_key(room)) or '0')
return {room, redis.call('HGETALL', card_key(room)), gen, seat, banned}
