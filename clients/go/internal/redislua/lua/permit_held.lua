-- After `permit_lapsed.lua`. KEYS: holders, permits, taken. The permits live
-- holders hold.
while drop_lapsed(1000) == 1000 do end
return taken()
