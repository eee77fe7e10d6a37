-- KEYS: versioned record. ARGV: expected version, value, ttl ms, writer
-- token (random per write).
--
-- Writes when the record's version (0 when absent) is the expected one;
-- the new version is `max(version + 1, server TIME in µs)`, so versions
-- keep growing after the record expired (a stale `expected` can never
-- match a new record). Returns the new version, or 0 on a conflict. A
-- retry of a write that applied (its reply lost) finds its own token and
-- returns its version, so the script is safe to repeat.
local current = tonumber(redis.call('HGET', KEYS[1], 'v') or '0')
if redis.call('HGET', KEYS[1], 'w') == ARGV[4] then return current end
if current ~= tonumber(ARGV[1]) then return 0 end
local t = redis.call('TIME')
local version = math.max(current + 1, tonumber(t[1]) * 1000000 + tonumber(t[2]))
redis.call('HSET', KEYS[1], 'v', string.format('%.0f', version), 'd', ARGV[2], 'w', ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return version
