-- After `line.lua` and `release_holder.lua`. KEYS: lock, channel,
-- holder, queue, places, readers. ARGV: owner. A reader leaving last tells
-- the first in line. Returns 1 when released, else 0.
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
