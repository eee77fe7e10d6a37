//! The Lua scripts: each is one atomic step on the server. redis-rs sends
//! them with EVALSHA and falls back to EVAL when the server answers
//! NOSCRIPT (after a restart or SCRIPT FLUSH).

use redis::Script;

/// KEYS: lock, fence, holder. ARGV: owner, ttl ms, label ('' for none). Idempotent for one owner, so
/// it is safe to retry when a connection drops before the reply arrives.
/// Returns `{1, fence}` when granted; `{0, pttl}` when held; `{-1, type}`
/// when the lock key is not a string; `{-2, 0}` when it is a string without
/// expiry (not written by a lock client); `{-3, 0}` when the fence counter
/// is not a number.
///
/// The fence is `max(counter + 1, server TIME in µs)`, computed cheaply: the
/// counter never expires, so while it exists it already exceeds every TIME
/// it was seeded with plus one per grant, and `INCR` is the maximum; only
/// when it is missing (a new name, or a restart without persistence that
/// lost it) is it seeded from TIME, which then exceeds every token issued
/// before (fewer than one grant per microsecond) unless the server's clock
/// went backwards meanwhile. Lua numbers are doubles; microseconds since
/// 1970 stay below 2^53 for centuries, so the arithmetic is exact. The
/// uncontended path costs two commands on the server (`SET`, `INCR`).
pub const ACQUIRE: &str = r#"
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local fence = redis.pcall('INCR', KEYS[2])
  if type(fence) == 'table' then
    redis.call('DEL', KEYS[1])
    return {-3, 0}
  end
  if fence == 1 then
    local t = redis.call('TIME')
    fence = tonumber(t[1]) * 1000000 + tonumber(t[2])
    redis.call('SET', KEYS[2], string.format('%.0f', fence))
  end
  if ARGV[3] ~= '' then redis.call('SET', KEYS[3], ARGV[3], 'PX', ARGV[2]) end
  return {1, fence}
end
local holder = redis.pcall('GET', KEYS[1])
if type(holder) == 'table' then return {-1, redis.call('TYPE', KEYS[1]).ok} end
-- A retry after a lost reply: the lock is already ours.
if holder == ARGV[1] then return {1, redis.call('GET', KEYS[2])} end
local pttl = redis.call('PTTL', KEYS[1])
if pttl == -1 then return {-2, 0} end
return {0, pttl}
"#;

/// KEYS: lock, channel, holder. ARGV: owner. Returns 1 when released, else 0.
pub const RELEASE: &str = r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1], KEYS[3])
  redis.call('PUBLISH', KEYS[2], ARGV[1])
  return 1
end
return 0
"#;

/// KEYS: lock, holder. ARGV: owner, ttl ms. Returns 1 when extended, else 0.
pub const EXTEND: &str = r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"#;

/// KEYS: lock, fence, holder. Returns `{owner or false, pttl, fence or false,
/// label or false}`.
pub const INSPECT: &str = r#"
if redis.call('TYPE', KEYS[1]).ok ~= 'string' then return {false, -2, false, false} end
return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[2]), redis.call('GET', KEYS[3])}
"#;

/// The compiled scripts, hashed once per store.
pub(crate) struct Scripts {
    pub acquire: Script,
    pub release: Script,
    pub extend: Script,
    pub inspect: Script,
    pub write_versioned: Script,
}

impl Scripts {
    pub(crate) fn new() -> Self {
        Scripts {
            acquire: Script::new(ACQUIRE),
            release: Script::new(RELEASE),
            extend: Script::new(EXTEND),
            inspect: Script::new(INSPECT),
            write_versioned: Script::new(WRITE_VERSIONED),
        }
    }
}

/// KEYS: versioned record. ARGV: expected version, value, ttl ms, writer
/// token (random per write).
///
/// Writes when the record's version (0 when absent) is the expected one;
/// the new version is `max(version + 1, server TIME in µs)`, so versions
/// keep growing after the record expired (a stale `expected` can never
/// match a new record). Returns the new version, or 0 on a conflict. A
/// retry of a write that applied (its reply lost) finds its own token and
/// returns its version, so the script is safe to repeat.
pub const WRITE_VERSIONED: &str = r#"
local current = tonumber(redis.call('HGET', KEYS[1], 'v') or '0')
if redis.call('HGET', KEYS[1], 'w') == ARGV[4] then return current end
if current ~= tonumber(ARGV[1]) then return 0 end
local t = redis.call('TIME')
local version = math.max(current + 1, tonumber(t[1]) * 1000000 + tonumber(t[2]))
redis.call('HSET', KEYS[1], 'v', string.format('%.0f', version), 'd', ARGV[2], 'w', ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return version
"#;
