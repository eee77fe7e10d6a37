//! The semaphore's Lua scripts, one atomic step each (the layout they keep
//! is described in `permits.rs`).

use redis::Script;

use super::scripts::NEXT_FENCE;

/// The server's clock (`now_ms`, `now_us`), and `drop_lapsed(limit)`: drops up to `limit`
/// holders whose lease ran out, gives their permits back, and returns how
/// many it dropped. KEYS: holders, permits, taken.
const LAPSED: &str = r#"
local clock = redis.call('TIME')
local now_ms = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local now_us = string.format('%.0f', tonumber(clock[1]) * 1000000 + tonumber(clock[2]))
local function drop_lapsed(limit)
  local lapsed = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', string.format('%.0f', now_ms), 'LIMIT', 0, limit)
  if #lapsed == 0 then return 0 end
  local freed = 0
  for _, held in ipairs(redis.call('HMGET', KEYS[2], unpack(lapsed))) do
    if held then freed = freed + tonumber(string.match(held, '^%d+')) end
  end
  redis.call('ZREM', KEYS[1], unpack(lapsed))
  redis.call('HDEL', KEYS[2], unpack(lapsed))
  if freed > 0 and redis.call('DECRBY', KEYS[3], freed) <= 0 then redis.call('DEL', KEYS[3]) end
  return #lapsed
end
local function taken() return tonumber(redis.call('GET', KEYS[3]) or '0') end
"#;

/// After [`LAPSED`] and [`NEXT_FENCE`]. KEYS: holders, permits, taken,
/// fence. ARGV: owner, permits of the semaphore, permits to take, ttl ms.
///
/// Returns `{1, fence}` when taken (or already held by the owner: a
/// retried call), `{0, free}` when the permits do not fit, `{-1, 0}` when
/// the keys hold something lockward did not write, `{-3, 0}` when the
/// fence counter is not a number. The fence is minted as a lock's is, by
/// [`NEXT_FENCE`].
const TAKE: &str = r#"
local kinds = {'zset', 'hash', 'string'}
for i = 1, 3 do
  local t = redis.call('TYPE', KEYS[i]).ok
  if t ~= kinds[i] and t ~= 'none' then return {-1, 0} end
end
drop_lapsed(16)
local mine = redis.call('HGET', KEYS[2], ARGV[1])
if mine then return {1, tonumber(string.match(mine, ' (%d+)$'))} end
local of, take = tonumber(ARGV[2]), tonumber(ARGV[3])
if taken() + take > of then
  while drop_lapsed(1000) == 1000 do end
  local free = of - taken()
  if take > free then return {0, math.max(free, 0)} end
end
local fence = next_fence(KEYS[4])
if not fence then return {-3, 0} end
redis.call('ZADD', KEYS[1], string.format('%.0f', now_ms + tonumber(ARGV[4])), ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3] .. ' ' .. string.format('%.0f', fence))
redis.call('INCRBY', KEYS[3], take)
return {1, fence}
"#;

/// After [`LAPSED`]. KEYS: holders. ARGV: owner, ttl ms. 1 when the
/// owner's lease was live and now runs `ttl` from now, else 0.
const EXTEND: &str = r#"
local expiry = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not expiry or tonumber(expiry) <= now_ms then return 0 end
redis.call('ZADD', KEYS[1], 'XX', string.format('%.0f', now_ms + tonumber(ARGV[2])), ARGV[1])
return 1
"#;

/// After [`LAPSED`]. KEYS: holders, permits, taken. ARGV: owner. Gives the
/// owner's permits back; 1 when its lease was live, 0 when it had run out
/// or the owner held nothing.
const RELEASE: &str = r#"
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
"#;

/// After [`LAPSED`]. KEYS: holders, permits, taken. The permits live
/// holders hold.
const HELD: &str = r#"
while drop_lapsed(1000) == 1000 do end
return taken()
"#;

/// After [`LAPSED`]. KEYS: holders, permits, taken. The live holders:
/// `{owner, expiry ms from now, "PERMITS FENCE"}` each, flattened.
const LIST: &str = r#"
local out = {}
local live = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. string.format('%.0f', now_ms), '+inf', 'WITHSCORES')
for i = 1, #live, 2 do
  out[#out + 1] = live[i]
  out[#out + 1] = tonumber(live[i + 1]) - now_ms
  out[#out + 1] = redis.call('HGET', KEYS[2], live[i]) or ''
end
return out
"#;

/// The semaphore scripts, hashed once per store.
pub(crate) struct PermitScripts {
    pub(super) take: Script,
    pub(super) extend: Script,
    pub(super) release: Script,
    pub(super) held: Script,
    pub(super) list: Script,
}

impl PermitScripts {
    pub(crate) fn new() -> Self {
        PermitScripts {
            take: Script::new(&format!("{LAPSED}{NEXT_FENCE}{TAKE}")),
            extend: Script::new(&format!("{LAPSED}{EXTEND}")),
            release: Script::new(&format!("{LAPSED}{RELEASE}")),
            held: Script::new(&format!("{LAPSED}{HELD}")),
            list: Script::new(&format!("{LAPSED}{LIST}")),
        }
    }
}
