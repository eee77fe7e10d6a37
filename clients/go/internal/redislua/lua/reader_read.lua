-- After `line.lua` and `next_fence.lua`. KEYS: lock, fence, holder, queue,
-- places, channel, readers. ARGV: owner, ttl ms, label (unused), place ms
-- ('0': try without joining the line). Replies as `acquire.lua` does; a
-- reader's fence is drawn from the lock's counter as a writer's is.
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
  join_line(KEYS[4], KEYS[5], ARGV[1], string.format('%.0f', now_us), ARGV[4])
  first = first or ARGV[1]
end
if writer == 'string' then
  local pttl = redis.call('PTTL', KEYS[1])
  if pttl == -1 then return {-2, 0} end
  if joined and first ~= ARGV[1] then return {0, -1} end
  return {0, pttl}
end
-- Free, but kept for the first in line: remind it.
return {0, remind_first(KEYS[6], KEYS[5], first)}
