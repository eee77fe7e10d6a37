//! The Lua scripts: each is one atomic step on the server. redis-rs sends
//! them with EVALSHA and falls back to EVAL when the server answers
//! NOSCRIPT (after a restart or SCRIPT FLUSH). The scripts that read a
//! name's line of waiters start with [`LINE`].

use redis::Script;

/// The line of waiters of a name, shared by the scripts that read it:
/// `now_ms` (the server's clock) and `first_in_line(queue, places)`.
///
/// The queue is a sorted set of owners by ticket (the order they joined);
/// `places` holds each owner's place lease (its expiry, server ms). Both
/// hold the same members and vanish together when the last one leaves.
/// `first_in_line` drops lapsed places (waiters that died) and returns the
/// first live owner, `false` when nobody queues, or `nil` when the keys
/// hold something lockward did not write. `tell` publishes on the turn
/// channel of one waiter (the name's channel + `:` + owner), so a release
/// reaches the next in line's connection only, however many wait.
pub const LINE: &str = r#"
local clock = redis.call('TIME')
local now_ms = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local now_us = string.format('%.0f', tonumber(clock[1]) * 1000000 + tonumber(clock[2]))
local function first_in_line(queue, places)
  local kq, kp = redis.call('TYPE', queue).ok, redis.call('TYPE', places).ok
  if (kq ~= 'zset' and kq ~= 'none') or (kp ~= 'zset' and kp ~= 'none') then return nil end
  if kq == 'none' then return false end
  local lapsed = redis.call('ZRANGEBYSCORE', places, '-inf', string.format('%.0f', now_ms), 'LIMIT', 0, 64)
  if #lapsed > 0 then
    redis.call('ZREM', queue, unpack(lapsed))
    redis.call('ZREM', places, unpack(lapsed))
  end
  return redis.call('ZRANGE', queue, 0, 0)[1] or false
end
-- Wakes `owner` alone: each waiter listens on a turn channel of its own.
local function tell(channel, owner)
  redis.call('PUBLISH', channel .. ':' .. owner, owner)
end
-- Drops the lapsed readers of a read-write lock; returns how many read
-- and the last one's expiry (server ms), or -1 when the key is not ours.
local function live_readers(readers)
  local kind = redis.call('TYPE', readers).ok
  if kind == 'none' then return 0, 0 end
  if kind ~= 'zset' then return -1, 0 end
  redis.call('ZREMRANGEBYSCORE', readers, '-inf', string.format('%.0f', now_ms))
  local last = redis.call('ZRANGE', readers, -1, -1, 'WITHSCORES')
  if #last == 0 then return 0, 0 end
  return redis.call('ZCARD', readers), tonumber(last[2])
end
local function leave_line(queue, places, owner)
  if redis.call('TYPE', queue).ok == 'zset' then redis.call('ZREM', queue, owner) end
  if redis.call('TYPE', places).ok == 'zset' then redis.call('ZREM', places, owner) end
end
"#;

/// `next_fence(counter)`, for the scripts that grant (after the clock
/// `now_us`, µs, which [`LINE`] and the semaphore's scripts read): the
/// grant's fence is `max(counter + 1, now_us)`, and the counter keeps it.
/// The counter alone is not enough: one that came back older than the last
/// fence granted (a replica promoted before it had the last grants, a
/// restart from a snapshot or an AOF that lost its last second) would hand
/// out those fences again, so the clock is taken on every grant, not only
/// when the counter is missing. It is ahead of every fence granted before
/// the loss as long as the server's clock is not behind the lost one's by
/// more than the time from the last lost grant to this one (and a name is
/// granted less than once a microsecond). Returns `nil` when the counter
/// holds something that is not a number. Lua numbers are doubles:
/// microseconds since 1970 stay below 2^53 for centuries, so the
/// arithmetic is exact, and so is the fence in JSON and JavaScript.
pub const NEXT_FENCE: &str = r#"
local function next_fence(counter)
  local stored = redis.pcall('GET', counter)
  if type(stored) == 'table' then return nil end
  local last = 0
  if stored then
    last = tonumber(stored)
    if not last then return nil end
  end
  local fence = math.max(last + 1, tonumber(now_us))
  redis.call('SET', counter, string.format('%.0f', fence))
  return fence
end
"#;

/// After [`LINE`] and [`NEXT_FENCE`]. KEYS: lock, fence, holder, queue,
/// places, channel, readers. ARGV: owner, ttl ms, label ('' for none),
/// place ms ('0': try without joining the line).
///
/// Grants the lock when it is free, nobody reads it (see `readers.rs`) and
/// nobody queues ahead of the owner;
/// otherwise, with a place lease, joins the line (or renews the owner's
/// place). Idempotent for one owner, so it is safe to retry when a
/// connection drops before the reply arrives. Returns `{1, fence}` when
/// granted; `{0, ms}` when not, `ms` being when to look again (the
/// holder's expiry, or the lapse of the first place when the lock is free
/// but kept for the first in line; -1: at the next turn, for waiters
/// behind the first); `{-1, type}` when the lock key is not a string;
/// `{-2, 0}` when it is a string without expiry (not written by a lock
/// client); `{-3, 0}` when the fence counter is not a number; `{-4, 0}`
/// when the line's keys or the readers' are not lockward's. While readers
/// read, `ms` is when the last one's lease ends (the last to leave tells
/// the first in line).
///
/// The fence comes from [`NEXT_FENCE`]. When the lock is free and nobody
/// queues (the uncontended path), this costs `SET`, `GET` and `SET` plus
/// two `TYPE` lookups on the server.
pub const ACQUIRE: &str = r#"
local first = first_in_line(KEYS[4], KEYS[5])
if first == nil then return {-4, 0} end
local readers, last_read = live_readers(KEYS[7])
if readers < 0 then return {-4, 0} end
if (not first or first == ARGV[1]) and readers == 0 and redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local fence = next_fence(KEYS[2])
  if not fence then
    redis.call('DEL', KEYS[1])
    return {-3, 0}
  end
  if first then leave_line(KEYS[4], KEYS[5], ARGV[1]) end
  if ARGV[3] ~= '' then redis.call('SET', KEYS[3], ARGV[3], 'PX', ARGV[2]) end
  return {1, fence}
end
local holder = redis.pcall('GET', KEYS[1])
if type(holder) == 'table' then return {-1, redis.call('TYPE', KEYS[1]).ok} end
-- A retry after a lost reply: the lock is already ours.
if holder == ARGV[1] then
  leave_line(KEYS[4], KEYS[5], ARGV[1])
  return {1, redis.call('GET', KEYS[2])}
end
local pttl = redis.call('PTTL', KEYS[1])
if pttl == -1 then return {-2, 0} end
local joined = ARGV[4] ~= '0'
if joined then
  redis.call('ZADD', KEYS[4], 'NX', now_us, ARGV[1])
  redis.call('ZADD', KEYS[5], string.format('%.0f', now_ms + tonumber(ARGV[4])), ARGV[1])
  first = first or ARGV[1]
end
if readers > 0 then
  if joined and first ~= ARGV[1] then return {0, -1} end
  return {0, math.max(1, last_read - now_ms)}
end
if pttl == -2 then
  -- Free, but kept for the first in line: remind it, and look again when
  -- its place would lapse.
  if first then tell(KEYS[6], first) end
  return {0, math.max(0, tonumber(redis.call('ZSCORE', KEYS[5], first) or now_ms) - now_ms)}
end
if joined and first ~= ARGV[1] then return {0, -1} end
return {0, pttl}
"#;

/// The body of [`RELEASE`] that frees the lock key of its owner.
macro_rules! release_holder {
    () => {
        r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1], KEYS[3])
  local next = first_in_line(KEYS[4], KEYS[5])
  redis.call('PUBLISH', KEYS[2], next or '')
  if next then tell(KEYS[2], next) end
  return 1
end
"#
    };
}

/// After [`LINE`]. KEYS: lock, channel, holder, queue, places. ARGV: owner.
/// Returns 1 when released, else 0. Publishes the owner first in line (or
/// '' when nobody queues) on the name's channel, for watchers, and on that
/// waiter's turn channel, which wakes it.
pub const RELEASE: &str = concat!(release_holder!(), "return 0\n");

/// [`RELEASE`] without its final `return 0`: the read side's release
/// follows it (see `readers.rs`).
pub const RELEASE_HOLDER: &str = release_holder!();

/// After [`LINE`]. KEYS: lock, channel, queue, places. ARGV: owner.
/// Takes the owner's place out of the line; when the lock is free, tells
/// the next in line. Returns 1.
pub const LEAVE: &str = r#"
leave_line(KEYS[3], KEYS[4], ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 0 then
  local first = first_in_line(KEYS[3], KEYS[4])
  if first then tell(KEYS[2], first) end
end
return 1
"#;

/// KEYS: lock, holder. ARGV: owner, ttl ms. Returns 1 when extended, else 0.
pub const EXTEND: &str = r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"#;

/// KEYS: lock, holder. ARGV: owner, placeholder, label. For a forced unlock
/// of a holder with a lock-delay: the owner's lock passes to the
/// placeholder with the time it had left (the fence counter is untouched),
/// so the name stays taken until then and the holder's renewals fail.
/// Returns 1 when handed over, else 0.
pub const HOLD_BACK: &str = r#"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local left = redis.call('PTTL', KEYS[1])
if left <= 0 then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', left)
redis.call('SET', KEYS[2], ARGV[3], 'PX', left)
return 1
"#;

/// KEYS: lock, fence, holder, queue. Returns `{owner or false, pttl, fence
/// or false, label or false, waiters in line}`.
pub const INSPECT: &str = r#"
if redis.call('TYPE', KEYS[1]).ok ~= 'string' then return {false, -2, false, false, 0} end
local waiters = 0
if redis.call('TYPE', KEYS[4]).ok == 'zset' then waiters = redis.call('ZCARD', KEYS[4]) end
return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[2]), redis.call('GET', KEYS[3]), waiters}
"#;

/// The compiled scripts, hashed once per store.
pub(crate) struct Scripts {
    pub acquire: Script,
    pub hold_back: Script,
    pub inspect: Script,
    pub leave: Script,
    pub write_versioned: Script,
}

impl Scripts {
    pub(crate) fn new() -> Self {
        Scripts {
            acquire: Script::new(&format!("{LINE}{NEXT_FENCE}{ACQUIRE}")),
            hold_back: Script::new(HOLD_BACK),
            inspect: Script::new(INSPECT),
            leave: Script::new(&format!("{LINE}{LEAVE}")),
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
