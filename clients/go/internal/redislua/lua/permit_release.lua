-- After `permit_lapsed.lua`. KEYS: holders, permits, taken. ARGV: owner. Gives the
-- owner's permits back; 1 when its lease was live, 0 when it had run out
-- or the owner held nothing.
local expiry = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not expiry then return 0 end
local held = redis.call('HGET', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
if held and redis.call('DECRBY', KEYS[3], tonumber(string.match(held, '^%d+'))) <= 0 then
  redis.call('DEL', KEYS[3])
end
if tonumber(expiry) <= now_ms then return 0 end
return 1
