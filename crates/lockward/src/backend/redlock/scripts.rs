//! The per-master scripts of the two-round Redlock acquisition. Release,
//! extend and inspect are the Redis backend's (`backend::redis::scripts`).

/// Round one. KEYS: lock, fence, holder. ARGV: owner, ttl ms, label ('' for
/// none).
///
/// Takes the lock on this master (`SET NX PX`) and reads this master's
/// fence as `max(counter, TIME in µs)`, without changing the counter.
/// Returns `{1, reading}` when granted (also on a retry by the same
/// owner); `{0, pttl}` when held; `{-1, type}`, `{-2, 0}`, `{-3, 0}` for a
/// lock key that is not a string, one without expiry, or a counter that is
/// not a number (as the Redis backend's acquire script).
pub const GRANT: &str = r#"
local function reading()
  local counter = tonumber(redis.call('GET', KEYS[2]) or '0')
  local t = redis.call('TIME')
  local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  return string.format('%.0f', math.max(counter, now_us))
end
local counter = redis.pcall('GET', KEYS[2])
if counter and (type(counter) == 'table' or not tonumber(counter)) then return {-3, 0} end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  if ARGV[3] ~= '' then redis.call('SET', KEYS[3], ARGV[3], 'PX', ARGV[2]) end
  return {1, reading()}
end
local holder = redis.pcall('GET', KEYS[1])
if type(holder) == 'table' then return {-1, redis.call('TYPE', KEYS[1]).ok} end
if holder == ARGV[1] then return {1, reading()} end
local pttl = redis.call('PTTL', KEYS[1])
if pttl == -1 then return {-2, 0} end
return {0, pttl}
"#;

/// Round two. KEYS: lock, fence. ARGV: owner, token.
///
/// Raises this master's counter to `token` (never lowers it), only while
/// `owner` still holds the lock here. Returns 1 when accepted, else 0.
pub const RAISE: &str = r#"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local counter = tonumber(redis.call('GET', KEYS[2]) or '0')
if counter == nil or counter < tonumber(ARGV[2]) then
  redis.call('SET', KEYS[2], ARGV[2])
end
return 1
"#;

/// A versioned write on one master, made under the record's write lock.
/// KEYS: versioned record. ARGV: the write lock's fence (the new version),
/// value, ttl ms.
///
/// Refused when this master holds a version above the fence: that write
/// came from a later holder of the write lock, so this one is stale.
/// Returns 1 when written, else 0.
pub const WRITE_VERSIONED: &str = r#"
local current = tonumber(redis.call('HGET', KEYS[1], 'v') or '0')
if current > tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'v', ARGV[1], 'd', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
"#;
