//! The Lua scripts: each is one atomic step on the server. redis-rs sends
//! them with EVALSHA and falls back to EVAL when the server answers
//! NOSCRIPT (after a restart or SCRIPT FLUSH).

use redis::Script;

/// KEYS: lock, fence. ARGV: owner, ttl ms. Idempotent for one owner, so
/// it is safe to retry when a connection drops before the reply arrives.
/// Returns `{1, fence}` when granted; `{0, pttl}` when held; `{-1, type}`
/// when the lock key is not a string; `{-2, 0}` when it is a string without
/// expiry (not written by a lock client); `{-3, 0}` when the fence counter
/// is not a number.
///
/// The fence is `max(counter + 1, TIME in µs)`: the counter never expires,
/// and the clock term keeps tokens growing even after a restart that lost
/// the counter (a Redis without persistence), unless the server's clock
/// went backwards meanwhile. Lua numbers are doubles; microseconds since
/// 1970 stay below 2^53 for centuries, so the arithmetic is exact.
pub const ACQUIRE: &str = r#"
local kind = redis.call('TYPE', KEYS[1]).ok
if kind ~= 'none' and kind ~= 'string' then return {-1, kind} end
local counter = redis.call('GET', KEYS[2])
if counter and not tonumber(counter) then return {-3, 0} end
-- A retry after a lost reply: the lock is already ours.
if redis.call('GET', KEYS[1]) == ARGV[1] then return {1, counter} end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local t = redis.call('TIME')
  local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local fence = math.max(tonumber(counter or '0') + 1, now_us)
  local text = string.format('%.0f', fence)
  redis.call('SET', KEYS[2], text)
  return {1, text}
end
local pttl = redis.call('PTTL', KEYS[1])
if pttl == -1 then return {-2, 0} end
return {0, pttl}
"#;

/// KEYS: lock, channel. ARGV: owner. Returns 1 when released, else 0.
pub const RELEASE: &str = r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', KEYS[2], ARGV[1])
  return 1
end
return 0
"#;

/// KEYS: lock. ARGV: owner, ttl ms. Returns 1 when extended, else 0.
pub const EXTEND: &str = r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"#;

/// KEYS: lock, fence. Returns `{owner or false, pttl, fence or false}`.
pub const INSPECT: &str = r#"
if redis.call('TYPE', KEYS[1]).ok ~= 'string' then return {false, -2, false} end
return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[2])}
"#;

/// The compiled scripts, hashed once per store.
pub(crate) struct Scripts {
    pub acquire: Script,
    pub release: Script,
    pub extend: Script,
    pub inspect: Script,
}

impl Scripts {
    pub(crate) fn new() -> Self {
        Scripts {
            acquire: Script::new(ACQUIRE),
            release: Script::new(RELEASE),
            extend: Script::new(EXTEND),
            inspect: Script::new(INSPECT),
        }
    }
}
