-- The line of waiters of a name, shared by the scripts that read it:
-- `now_ms` (the server's clock) and `first_in_line(queue, places)`.
--
-- The queue is a sorted set of owners by ticket (the order they joined);
-- `places` holds each owner's place lease (its expiry, server ms). Both
-- hold the same members and vanish together when the last one leaves.
-- `first_in_line` drops lapsed places (waiters that died) and returns the
-- first live owner, `false` when nobody queues, or `nil` when the keys
-- hold something lockward did not write. `tell` publishes on the turn
-- channel of one waiter (the name's channel + `:` + owner), so a release
-- reaches the next in line's connection only, however many wait.
local clock = redis.call('TIME')
local now_ms = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
-- A number (exact: below 2^53); formatted only where a command takes it,
-- as formatting costs as much as a command.
local now_us = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local function first_in_line(queue, places)
  local kq, kp = redis.call('TYPE', queue).ok, redis.call('TYPE', places).ok
  if (kq ~= 'zset' and kq ~= 'none') or (kp ~= 'zset' and kp ~= 'none') then return nil end
  if kq == 'none' then return false end
  local lapsed = redis.call('ZRANGEBYSCORE', places, '-inf', string.format('%.0f', now_ms), 'LIMIT', 0, 64)
  if #lapsed > 0 then
    redis.call('ZREM', queue, unpack(lapsed))
    redis.call('ZREM', places, unpack(lapsed))
  end
  return redis.call('ZRANGE', queue, 0, 0)[1] or false
end
-- Wakes `owner` alone: each waiter listens on a turn channel of its own.
local function tell(channel, owner)
  redis.call('PUBLISH', channel .. ':' .. owner, owner)
end
-- Drops the lapsed readers of a read-write lock; returns how many read
-- and the last one's expiry (server ms), or -1 when the key is not ours.
local function live_readers(readers)
  local kind = redis.call('TYPE', readers).ok
  if kind == 'none' then return 0, 0 end
  if kind ~= 'zset' then return -1, 0 end
  redis.call('ZREMRANGEBYSCORE', readers, '-inf', string.format('%.0f', now_ms))
  local last = redis.call('ZRANGE', readers, -1, -1, 'WITHSCORES')
  if #last == 0 then return 0, 0 end
  return redis.call('ZCARD', readers), tonumber(last[2])
end
-- Puts `owner` in the line under `ticket` (kept when it is there already)
-- with a place lease of `place_ms` from now, or renews that lease.
local function join_line(queue, places, owner, ticket, place_ms)
  redis.call('ZADD', queue, 'NX', ticket, owner)
  redis.call('ZADD', places, string.format('%.0f', now_ms + tonumber(place_ms)), owner)
end
-- The lock is free but kept for `first` in line: reminds it, and returns
-- when to look again (ms: when its place would lapse).
local function remind_first(channel, places, first)
  tell(channel, first)
  return math.max(0, tonumber(redis.call('ZSCORE', places, first) or now_ms) - now_ms)
end
local function leave_line(queue, places, owner)
  if redis.call('TYPE', queue).ok == 'zset' then redis.call('ZREM', queue, owner) end
  if redis.call('TYPE', places).ok == 'zset' then redis.call('ZREM', places, owner) end
end
