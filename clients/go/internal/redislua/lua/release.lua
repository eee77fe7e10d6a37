-- After `line.lua` and `release_holder.lua`. KEYS: lock, channel, holder,
-- queue, places. ARGV: owner. Returns 1 when released, else 0. Publishes
-- the owner first in line (or '' when nobody queues) on the name's
-- channel, for watchers, and on that waiter's turn channel, which wakes
-- it.
return 0
