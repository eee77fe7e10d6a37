//! The read side's Lua scripts, one atomic step each (how readers and
//! writers share a name is described in `readers.rs`).

use redis::Script;

use super::scripts::{LINE, NEXT_FENCE, RELEASE_HOLDER};

/// After [`LINE`] and [`NEXT_FENCE`]. KEYS: lock, fence, holder, queue,
/// places, channel, readers. ARGV: owner, ttl ms, label (unused), place ms
/// ('0': try without joining the line). Replies as `ACQUIRE` does; a
/// reader's fence is drawn from the lock's counter as a writer's is.
const READ: &str = r#"
local first = first_in_line(KEYS[4], KEYS[5])
if first == nil then return {-4, 0} end
local readers = live_readers(KEYS[7])
if readers < 0 then return {-4, 0} end
-- A retry after a lost reply: already reading.
if redis.call('ZSCORE', KEYS[7], ARGV[1]) then
  leave_line(KEYS[4], KEYS[5], ARGV[1])
  return {1, tonumber(redis.call('GET', KEYS[2]))}
end
local writer = redis.call('TYPE', KEYS[1]).ok
if writer ~= 'none' and writer ~= 'string' then return {-1, writer} end
if writer == 'none' and (not first or first == ARGV[1]) then
  local fence = next_fence(KEYS[2])
  if not fence then return {-3, 0} end
  local expiry = now_ms + tonumber(ARGV[2])
  redis.call('ZADD', KEYS[7], string.format('%.0f', expiry), ARGV[1])
  local last = redis.call('ZRANGE', KEYS[7], -1, -1, 'WITHSCORES')
  redis.call('PEXPIREAT', KEYS[7], last[2])
  if first then leave_line(KEYS[4], KEYS[5], ARGV[1]) end
  -- Readers queued behind this one get in too; a writer looks again.
  local next = first_in_line(KEYS[4], KEYS[5])
  if next then tell(KEYS[6], next) end
  return {1, fence}
end
local joined = ARGV[4] ~= '0'
if joined then
  redis.call('ZADD', KEYS[4], 'NX', now_us, ARGV[1])
  redis.call('ZADD', KEYS[5], string.format('%.0f', now_ms + tonumber(ARGV[4])), ARGV[1])
  first = first or ARGV[1]
end
if writer == 'string' then
  local pttl = redis.call('PTTL', KEYS[1])
  if pttl == -1 then return {-2, 0} end
  if joined and first ~= ARGV[1] then return {0, -1} end
  return {0, pttl}
end
-- Free, but kept for the first in line: remind it.
tell(KEYS[6], first)
return {0, math.max(0, tonumber(redis.call('ZSCORE', KEYS[5], first) or now_ms) - now_ms)}
"#;

/// KEYS: lock, holder, readers. ARGV: owner, ttl ms. Extends the owner's
/// hold, as writer or reader. Returns 1 when extended, else 0.
const EXTEND: &str = r#"
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
"#;

/// After [`LINE`] and [`RELEASE_HOLDER`]. KEYS: lock, channel,
/// holder, queue, places, readers. ARGV: owner. A reader leaving last tells
/// the first in line. Returns 1 when released, else 0.
const RELEASE_READER: &str = r#"
if redis.call('TYPE', KEYS[6]).ok ~= 'zset' then return 0 end
local expiry = tonumber(redis.call('ZSCORE', KEYS[6], ARGV[1]) or 0)
if expiry == 0 then return 0 end
redis.call('ZREM', KEYS[6], ARGV[1])
if expiry <= now_ms then return 0 end
if live_readers(KEYS[6]) == 0 then
  local next = first_in_line(KEYS[4], KEYS[5])
  if next then tell(KEYS[2], next) end
end
return 1
"#;

/// KEYS: readers. Returns the live readers: `{owner, ms left, …}`.
const LIST: &str = r#"
if redis.call('TYPE', KEYS[1]).ok ~= 'zset' then return {} end
local clock = redis.call('TIME')
local now_ms = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local out = {}
local live = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. string.format('%.0f', now_ms), '+inf', 'WITHSCORES')
for i = 1, #live, 2 do
  out[#out + 1] = live[i]
  out[#out + 1] = tonumber(live[i + 1]) - now_ms
end
return out
"#;

/// The scripts of the read side and of the steps shared by readers and
/// writers.
pub(crate) struct ReaderScripts {
    pub read: Script,
    pub extend: Script,
    pub release: Script,
    pub list: Script,
}

impl ReaderScripts {
    pub(crate) fn new() -> Self {
        // The writer's release falls through to the reader's when the lock
        // key is not the owner's.
        let writer = RELEASE_HOLDER;
        ReaderScripts {
            read: Script::new(&format!("{LINE}{NEXT_FENCE}{READ}")),
            extend: Script::new(EXTEND),
            release: Script::new(&format!("{LINE}{writer}{RELEASE_READER}")),
            list: Script::new(LIST),
        }
    }
}
