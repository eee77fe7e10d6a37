-- A versioned write on one master, made under the record's write lock.
-- KEYS: versioned record. ARGV: the write lock's fence (the new version),
-- value, ttl ms.
--
-- Refused when this master holds a version above the fence: that write
-- came from a later holder of the write lock, so this one is stale.
-- Returns 1 when written, else 0.
local current = tonumber(redis.call('HGET', KEYS[1], 'v') or '0')
if current > tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'v', ARGV[1], 'd', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
