-- tap_done: a tap's effect and its mark, at once (bot/drafts.py): the callback query is noted
-- as handled and the player's draft written (or deleted, after the tap that sent the guess),
-- only if no other delivery of the same query did it first. A tap is marked seen only with
-- its effect, so a process that dies before this leaves a query that takes effect when it is
-- delivered again.
--
-- KEYS[1]   the callback query's mark (`cmx:{q}:tap:seen:<hash>`)
-- KEYS[2]   the player's draft of the round (`cmx:{q}:tap:draft:<round>:<user>`)
-- ARGV[1]   the mark's time to live, in seconds (the dedupe window)
-- ARGV[2]   the draft as text, or '' to delete it
-- ARGV[3]   the draft's expiry, Unix ms (the round's deadline)
-- Returns   1 when done here, 0 when another delivery of the query did it first (nothing
--           written)
if not redis.call('SET', KEYS[1], 1, 'NX', 'EX', ARGV[1]) then return 0 end
if ARGV[2] == '' then
  redis.call('DEL', KEYS[2])
else
  redis.call('SET', KEYS[2], ARGV[2], 'PXAT', ARGV[3])
end
return 1
