-- `next_fence(counter)`, for the scripts that grant (after the clock
-- `now_us`, µs, which `line.lua` and the semaphore's scripts read): the
-- grant's fence is `max(counter + 1, now_us)`, and the counter keeps it.
-- The counter alone is not enough: one that came back older than the last
-- fence granted (a replica promoted before it had the last grants, a
-- restart from a snapshot or an AOF that lost its last second) would hand
-- out those fences again, so the clock is taken on every grant, not only
-- when the counter is missing. It is ahead of every fence granted before
-- the loss as long as the server's clock is not behind the lost one's by
-- more than the time from the last lost grant to this one (and a name is
-- granted less than once a microsecond). Returns `nil` when the counter
-- holds something that is not a number. Lua numbers are doubles:
-- microseconds since 1970 stay below 2^53 for centuries, so the
-- arithmetic is exact, and so is the fence in JSON and JavaScript.
-- Checked by the model crates/lockward-models/src/lost_writes.rs.
local function next_fence(counter)
  local stored = redis.pcall('GET', counter)
  if type(stored) == 'table' then return nil end
  local last = 0
  if stored then
    last = tonumber(stored)
    if not last then return nil end
  end
  local fence = math.max(last + 1, now_us)
  redis.call('SET', counter, string.format('%.0f', fence))
  return fence
end
