-- posted_mark: right after Telegram took a post, note the rows it carried as posted (the
-- posted markers), so that a sender dying before the books say "sent" is not followed by a
-- second post of them. One call with every row's key: a busy chat's post carries dozens.
--
-- KEYS[1..] the posted markers of the rows (`cmx:{q}:send:posted:<row>`)
-- ARGV[1]   the Telegram message id that carried them (0: assumed posted, id unknown)
-- ARGV[2]   the markers' time to live, in seconds
-- Returns   the number of markers set
for i = 1, #KEYS do
  redis.call('SET', KEYS[i], ARGV[1], 'EX', ARGV[2])
end
return #KEYS
