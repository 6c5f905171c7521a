-- Settle a unit and heed the server's remaining (ledger.py's settle and heed_server).
local limit, period, unit = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local taken_at, sent, remaining = tonumber(ARGV[4]), ARGV[5] == '1', ARGV[6]
expire()
local function burn(count, at_first, at_rest)
  for i = 1, count do
    local id = 'p' .. redis.call('INCR', seq)
    if i == 1 then redis.call('ZADD', units, at_first, id)
    else redis.call('ZADD', units, at_rest, id) end
  end
end
if not sent then
  redis.call('ZREM', units, unit)
  redis.call('ZREM', taken, unit)
else
  local current = redis.call('ZSCORE', units, unit)
  if current and tonumber(current) > now + period then
    redis.call('ZADD', units, now + period, unit)
  end
  local own = redis.call('ZSCORE', taken, unit)
  if own then taken_at = tonumber(own) end
  if remaining ~= '' then
    -- Taken at the same instant counts as before (ledger.py's heed_server).
    local after = redis.call('ZCOUNT', taken, string.format('(%.17g', taken_at), '+inf')
    local allowed = tonumber(remaining) - after
    local free = limit - redis.call('ZCARD', units)
    if free > allowed then
      local count = free - math.max(0, allowed)
      if allowed > 0 then
        burn(count, now + period, now + period)
      else
        local oldest = redis.call('ZRANGE', taken, 0, -1)
        local min_real = nil
        for i = 1, #oldest do
          local s = tonumber(redis.call('ZSCORE', units, oldest[i]))
          if s and (min_real == nil or s < min_real) then min_real = s end
        end
        if min_real then burn(count, min_real + period, min_real + period)
        else burn(count, now + period, now + 2 * period) end
      end
    elseif free < allowed then
      local all = redis.call('ZREVRANGE', units, 0, -1)
      local give = allowed - free
      for i = 1, #all do
        if give <= 0 then break end
        if string.sub(all[i], 1, 1) == 'p' then
          redis.call('ZREM', units, all[i])
          give = give - 1
        end
      end
    end
  end
end
keep_alive(period, 0)
return view({})
