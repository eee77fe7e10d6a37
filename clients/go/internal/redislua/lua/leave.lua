-- After `line.lua`. KEYS: lock, channel, queue, places. ARGV: owner.
-- Takes the owner's place out of the line; when the lock is free, tells
-- the next in line. Returns 1.
leave_line(KEYS[3], KEYS[4], ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 0 then
  local first = first_in_line(KEYS[3], KEYS[4])
  if first then tell(KEYS[2], first) end
end
return 1
