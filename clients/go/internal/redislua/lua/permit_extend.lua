-- After `permit_lapsed.lua`. KEYS: holders. ARGV: owner, ttl ms. 1 when the
-- owner's lease was live and now runs `ttl` from now, else 0.
local expiry = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not expiry or tonumber(expiry) <= now_ms then return 0 end
redis.call('ZADD', KEYS[1], 'XX', string.format('%.0f', now_ms + tonumber(ARGV[2])), ARGV[1])
return 1
