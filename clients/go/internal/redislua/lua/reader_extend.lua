-- KEYS: lock, holder, readers. ARGV: owner, ttl ms. Extends the owner's
-- hold, as writer or reader. Returns 1 when extended, else 0.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
if redis.call('TYPE', KEYS[3]).ok ~= 'zset' then return 0 end
local clock = redis.call('TIME')
local now_ms = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local expiry = tonumber(redis.call('ZSCORE', KEYS[3], ARGV[1]) or 0)
if expiry <= now_ms then return 0 end
redis.call('ZADD', KEYS[3], 'XX', string.format('%.0f', now_ms + tonumber(ARGV[2])), ARGV[1])
local last = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[3], last[2])
return 1
