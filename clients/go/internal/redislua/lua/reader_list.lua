-- KEYS: readers. Returns the live readers: `{owner, ms left, …}`.
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
