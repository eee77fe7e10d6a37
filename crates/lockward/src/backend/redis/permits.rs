//! Semaphores kept by Redis: a sorted set of holders by lease expiry, a
//! hash of what each took, and the count of taken permits, changed
//! together by one script per step, so a permit costs the same however
//! many hold one.
//!
//! For a semaphore `N` (keys beside its lock key `L`, see [`keys`](super::keys)):
//!
//! | key | holds |
//! | --- | --- |
//! | `L:sem:holders` | holders' owner ids by lease expiry, server ms (a sorted set) |
//! | `L:sem:permits` | each holder's `PERMITS FENCE` (a hash) |
//! | `L:sem:taken` | permits taken by the holders listed, while any are |
//! | `L:sem:fence` | the last fencing token the semaphore issued; never expires |
//!
//! A holder whose lease ran out stays listed, its permits counted, until a
//! script meets it: every take drops up to 16 of them (so they never pile
//! up), and a take that would be refused first drops them all; each one is
//! dropped once, so the cost is spread over the takes.

use std::time::Duration;

use async_trait::async_trait;
use redis::{Script, Value};

use super::mutex::{int, millis, text, RedisBackend};
use crate::backend::{holder_row, no_permits, PermitBackend, Request};
use crate::error::Result;
use crate::lease::LockInfo;
use crate::name::Name;
use crate::owner::OwnerId;

/// The server's clock, and `drop_lapsed(limit)`: drops up to `limit`
/// holders whose lease ran out, gives their permits back, and returns how
/// many it dropped. KEYS: holders, permits, taken.
const LAPSED: &str = r#"
local clock = redis.call('TIME')
local now_ms = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
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

/// After [`LAPSED`]. KEYS: holders, permits, taken, fence. ARGV: owner,
/// permits of the semaphore, permits to take, ttl ms.
///
/// Returns `{1, fence}` when taken (or already held by the owner: a
/// retried call), `{0, free}` when the permits do not fit, `{-1, 0}` when
/// the keys hold something lockward did not write, `{-3, 0}` when the
/// fence counter is not a number. The fence is minted as a lock's is
/// (`max(counter + 1, server TIME in µs)`, see [`ACQUIRE`](super::scripts::ACQUIRE)).
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
local fence = redis.pcall('INCR', KEYS[4])
if type(fence) == 'table' then return {-3, 0} end
if fence == 1 then
  fence = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
  redis.call('SET', KEYS[4], string.format('%.0f', fence))
end
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
    take: Script,
    extend: Script,
    release: Script,
    held: Script,
    list: Script,
}

impl PermitScripts {
    pub(crate) fn new() -> Self {
        PermitScripts {
            take: Script::new(&format!("{LAPSED}{TAKE}")),
            extend: Script::new(&format!("{LAPSED}{EXTEND}")),
            release: Script::new(&format!("{LAPSED}{RELEASE}")),
            held: Script::new(&format!("{LAPSED}{HELD}")),
            list: Script::new(&format!("{LAPSED}{LIST}")),
        }
    }
}

/// What follows a semaphore's key (after the name) on its holders' key.
const HOLDERS_SUFFIX: &str = ":sem:holders";

/// The keys of semaphore `name`.
struct SemKeys {
    holders: String,
    permits: String,
    taken: String,
    fence: String,
}

impl RedisBackend {
    fn sem_keys(&self, name: &Name) -> SemKeys {
        let lock = self.keys(name).lock;
        SemKeys {
            holders: format!("{lock}{HOLDERS_SUFFIX}"),
            permits: format!("{lock}:sem:permits"),
            taken: format!("{lock}:sem:taken"),
            fence: format!("{lock}:sem:fence"),
        }
    }
}

#[async_trait]
impl PermitBackend for RedisBackend {
    async fn take_permits(&self, req: &Request<'_>, of: u32, take: u32) -> Result<u64> {
        let keys = self.sem_keys(req.name);
        let (reply, _): (Vec<Value>, _) = self
            .invoke(
                self.scripts
                    .permits
                    .take
                    .key(&keys.holders)
                    .key(&keys.permits)
                    .key(&keys.taken)
                    .key(&keys.fence)
                    .arg(req.owner.to_string())
                    .arg(of)
                    .arg(take)
                    .arg(millis(req.ttl)),
            )
            .await?;
        let number = |i: usize| reply.get(i).and_then(int);
        match (number(0), number(1)) {
            (Some(1), Some(fence)) if fence > 0 => Ok(fence as u64),
            (Some(0), Some(free)) => Err(no_permits(
                req.name.as_str(),
                take,
                u64::try_from(free).unwrap_or(0),
                of,
            )),
            (Some(-3), _) => Err(self.protocol(format!(
                "the fence counter {} is not a number; it was left untouched",
                keys.fence
            ))),
            _ => Err(self.protocol(format!(
                "the keys of semaphore {:?} ({}…) hold values that lockward did not write; \
                 they were left untouched",
                req.name.as_str(),
                keys.holders
            ))),
        }
    }

    async fn extend_permits(&self, name: &Name, owner: OwnerId, ttl: Duration) -> Result<()> {
        let keys = self.sem_keys(name);
        let (done, _): (i64, _) = self
            .invoke(
                self.scripts
                    .permits
                    .extend
                    .key(&keys.holders)
                    .key(&keys.permits)
                    .key(&keys.taken)
                    .arg(owner.to_string())
                    .arg(millis(ttl)),
            )
            .await?;
        crate::backend::owner_checked(name, u64::try_from(done).unwrap_or(0))
    }

    async fn release_permits(&self, name: &Name, owner: OwnerId) -> Result<()> {
        let keys = self.sem_keys(name);
        let (done, retried): (i64, _) = self
            .invoke(
                self.scripts
                    .permits
                    .release
                    .key(&keys.holders)
                    .key(&keys.permits)
                    .key(&keys.taken)
                    .arg(owner.to_string()),
            )
            .await?;
        // A retry after a dropped connection may find its permits given
        // back by the first attempt.
        if retried && done == 0 {
            return Ok(());
        }
        crate::backend::owner_checked(name, u64::try_from(done).unwrap_or(0))
    }

    async fn permits_held(&self, name: &Name) -> Result<u64> {
        let keys = self.sem_keys(name);
        let (held, _): (i64, _) = self
            .invoke(
                self.scripts
                    .permits
                    .held
                    .key(&keys.holders)
                    .key(&keys.permits)
                    .key(&keys.taken),
            )
            .await?;
        Ok(u64::try_from(held).unwrap_or(0))
    }

    async fn list_permits(&self, prefix: &str) -> Result<Vec<LockInfo>> {
        let names = self.names_with(prefix, HOLDERS_SUFFIX).await?;
        let mut rows = Vec::new();
        for name in names {
            let keys = self.sem_keys(&name);
            let (reply, _): (Vec<Value>, _) = self
                .invoke(
                    self.scripts
                        .permits
                        .list
                        .key(&keys.holders)
                        .key(&keys.permits)
                        .key(&keys.taken),
                )
                .await?;
            for holder in reply.chunks_exact(3) {
                let owner = text(&holder[0]).unwrap_or_default();
                let fence = text(&holder[2])
                    .and_then(|v| v.rsplit_once(' ').and_then(|(_, f)| f.parse().ok()));
                rows.push(LockInfo {
                    name: holder_row(name.as_str(), &owner),
                    owner,
                    holder: None,
                    fence,
                    expires_in: int(&holder[1])
                        .and_then(|ms| u64::try_from(ms).ok())
                        .map(Duration::from_millis),
                    waiters: None,
                });
            }
        }
        Ok(rows)
    }
}
