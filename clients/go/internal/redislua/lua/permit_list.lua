-- After `permit_lapsed.lua`. KEYS: holders, permits, taken. The live holders:
-- `{owner, expiry ms from now, "PERMITS FENCE"}` each, flattened.
local out = {}
local live = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. string.format('%.0f', now_ms), '+inf', 'WITHSCORES')
for i = 1, #live, 2 do
  out[#out + 1] = live[i]
  out[#out + 1] = tonumber(live[i + 1]) - now_ms
  out[#out + 1] = redis.call('HGET', KEYS[2], live[i]) or ''
end
return out
