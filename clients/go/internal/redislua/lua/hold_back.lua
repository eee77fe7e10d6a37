-- KEYS: lock, holder. ARGV: owner, placeholder, label. For a forced unlock
-- of a holder with a lock-delay: the owner's lock passes to the
-- placeholder with the time it had left (the fence counter is untouched),
-- so the name stays taken until then and the holder's renewals fail.
-- Returns 1 when handed over, else 0.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local left = redis.call('PTTL', KEYS[1])
if left <= 0 then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', left)
redis.call('SET', KEYS[2], ARGV[3], 'PX', left)
return 1
