-- Round two, after `line.lua`. KEYS: lock, fence, queue,
-- places. ARGV: owner, token.
--
-- Raises this master's counter to `token` (never lowers it) and takes the
-- owner out of this master's line, only while `owner` still holds the
-- lock here. Returns 1 when accepted, else 0.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local counter = tonumber(redis.call('GET', KEYS[2]) or '0')
if counter == nil or counter < tonumber(ARGV[2]) then
  redis.call('SET', KEYS[2], ARGV[2])
end
leave_line(KEYS[3], KEYS[4], ARGV[1])
return 1
