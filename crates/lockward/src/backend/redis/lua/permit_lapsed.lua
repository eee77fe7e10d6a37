-- The server's clock (`now_ms`, `now_us`), and `drop_lapsed(limit)`: drops up to `limit`
-- holders whose lease ran out, gives their permits back, and returns how
-- many it dropped. KEYS: holders, permits, taken.
local clock = redis.call('TIME')
local now_ms = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local now_us = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
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
