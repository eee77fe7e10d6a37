-- After `line.lua` and `next_fence.lua`. KEYS: lock, fence, holder, queue,
-- places, channel, readers. ARGV: owner, ttl ms, label ('' for none),
-- place ms ('0': try without joining the line).
--
-- Grants the lock when it is free, nobody reads it (see `readers.rs`) and
-- nobody queues ahead of the owner;
-- otherwise, with a place lease, joins the line (or renews the owner's
-- place). Idempotent for one owner, so it is safe to retry when a
-- connection drops before the reply arrives. Returns `{1, fence}` when
-- granted; `{0, ms}` when not, `ms` being when to look again (the
-- holder's expiry, or the lapse of the first place when the lock is free
-- but kept for the first in line; -1: at the next turn, for waiters
-- behind the first); `{-1, type}` when the lock key is not a string;
-- `{-2, 0}` when it is a string without expiry (not written by a lock
-- client); `{-3, 0}` when the fence counter is not a number; `{-4, 0}`
-- when the line's keys or the readers' are not lockward's. While readers
-- read, `ms` is when the last one's lease ends (the last to leave tells
-- the first in line).
--
-- The fence comes from `next_fence.lua`. When the lock is free and nobody
-- queues or reads (the uncontended path), this costs `TIME`, one `EXISTS`,
-- `SET`, `GET` and `SET` (and the label's `SET` when one is given).
-- Nobody queues and nobody reads (one lookup of the three keys): the
-- uncontended path, which needs neither the line nor the readers.
local first, readers, last_read = false, 0, 0
if redis.call('EXISTS', KEYS[4], KEYS[5], KEYS[7]) > 0 then
  first = first_in_line(KEYS[4], KEYS[5])
  if first == nil then return {-4, 0} end
  readers, last_read = live_readers(KEYS[7])
  if readers < 0 then return {-4, 0} end
end
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
  join_line(KEYS[4], KEYS[5], ARGV[1], string.format('%.0f', now_us), ARGV[4])
  first = first or ARGV[1]
end
if readers > 0 then
  if joined and first ~= ARGV[1] then return {0, -1} end
  return {0, math.max(1, last_read - now_ms)}
end
-- Free, but kept for the first in line (the owner is not: it would have
-- been granted above).
if pttl == -2 then return {0, remind_first(KEYS[6], KEYS[5], first)} end
if joined and first ~= ARGV[1] then return {0, -1} end
return {0, pttl}
