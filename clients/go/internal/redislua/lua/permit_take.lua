-- After `permit_lapsed.lua` and `next_fence.lua`. KEYS: holders, permits, taken,
-- fence. ARGV: owner, permits of the semaphore, permits to take, ttl ms.
--
-- Returns `{1, fence}` when taken (or already held by the owner: a
-- retried call), `{0, free}` when the permits do not fit, `{-1, 0}` when
-- the keys hold something lockward did not write, `{-3, 0}` when the
-- fence counter is not a number. The fence is minted as a lock's is, by
-- `next_fence.lua`.
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
