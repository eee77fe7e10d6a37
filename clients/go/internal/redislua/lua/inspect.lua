-- KEYS: lock, fence, holder, queue. Returns `{owner or false, pttl, fence
-- or false, label or false, waiters in line}`.
if redis.call('TYPE', KEYS[1]).ok ~= 'string' then return {false, -2, false, false, 0} end
local waiters = 0
if redis.call('TYPE', KEYS[4]).ok == 'zset' then waiters = redis.call('ZCARD', KEYS[4]) end
return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[2]), redis.call('GET', KEYS[3]), waiters}
