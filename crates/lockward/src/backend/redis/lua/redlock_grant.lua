-- Round one, after `line.lua`. KEYS: lock, fence, holder,
-- queue, places, channel. ARGV: owner, ttl ms, label ('' for none), place
-- ms ('0': try without joining the line), ticket (the waiter's own
-- clock, µs, the same on every master).
--
-- Takes the lock on this master (`SET NX PX`) when it is free and nobody
-- queues ahead of the owner, and reads this master's fence as
-- `max(counter, TIME in µs)`, without changing the counter. With a place
-- lease, joins this master's line (or renews the place) under the
-- waiter's ticket, so every master orders its line alike. Returns `{1,
-- reading}` when granted (also on a retry by the same owner); `{0, ms}`
-- when not, `ms` being when to look again (-1: at the next turn); `{-1,
-- type}`, `{-2, 0}`, `{-3, 0}`, `{-4, 0}` for a lock key that is not a
-- string, one without expiry, a counter that is not a number or a line
-- that is not lockward's (as `acquire.lua`).
local function reading()
  local counter = tonumber(redis.call('GET', KEYS[2]) or '0')
  return string.format('%.0f', math.max(counter, now_us))
end
local counter = redis.pcall('GET', KEYS[2])
if counter and (type(counter) == 'table' or not tonumber(counter)) then return {-3, 0} end
local first = first_in_line(KEYS[4], KEYS[5])
if first == nil then return {-4, 0} end
if (not first or first == ARGV[1]) and redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  if ARGV[3] ~= '' then redis.call('SET', KEYS[3], ARGV[3], 'PX', ARGV[2]) end
  return {1, reading()}
end
local holder = redis.pcall('GET', KEYS[1])
if type(holder) == 'table' then return {-1, redis.call('TYPE', KEYS[1]).ok} end
if holder == ARGV[1] then return {1, reading()} end
local pttl = redis.call('PTTL', KEYS[1])
if pttl == -1 then return {-2, 0} end
local joined = ARGV[4] ~= '0'
if joined then
  join_line(KEYS[4], KEYS[5], ARGV[1], ARGV[5], ARGV[4])
  first = first or ARGV[1]
end
if pttl == -2 then return {0, remind_first(KEYS[6], KEYS[5], first)} end
if joined and first ~= ARGV[1] then return {0, -1} end
return {0, pttl}
