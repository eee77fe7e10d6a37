-- Frees the lock key of its owner and tells the first in line (see
-- `release.lua`); falls through to what follows when the owner does not
-- hold it.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1], KEYS[3])
  -- Nobody queues (one lookup): nobody to tell but the watchers.
  local next = false
  if redis.call('EXISTS', KEYS[4], KEYS[5]) > 0 then next = first_in_line(KEYS[4], KEYS[5]) end
  redis.call('PUBLISH', KEYS[2], next or '')
  if next then tell(KEYS[2], next) end
  return 1
end
