-- Take a unit for KEYS (units, taken, seq) if more than ARGV[4] are free (ledger.py's take).
local limit, period, hold, keep = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]),
  tonumber(ARGV[4])
expire()
local in_use = redis.call('ZCARD', units)
local head
if limit - in_use > keep then
  redis.call('ZADD', units, now + period + hold, ARGV[5])
  redis.call('ZADD', taken, now, ARGV[5])
  head = {1, string.format('%.6f', now), '0'}
else
  local needed = in_use - (limit - keep - 1)
  local at = now + period
  local r = redis.call('ZRANGE', units, needed - 1, needed - 1, 'WITHSCORES')
  if r[2] then at = tonumber(r[2]) end
  head = {0, string.format('%.6f', now), string.format('%.6f', math.max(0, at - now))}
end
keep_alive(period, hold)
return view(head)
