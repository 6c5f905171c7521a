-- Shared head of the budget scripts (redis.py prepends it to take.lua and settle.lua):
-- the clock, expiry of units that came back, and the view.
pcall(redis.replicate_commands)
local units, taken, seq = KEYS[1], KEYS[2], KEYS[3]
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local function expire()
  local gone = redis.call('ZRANGEBYSCORE', units, '-inf', now)
  for i = 1, #gone do redis.call('ZREM', taken, gone[i]) end
  redis.call('ZREMRANGEBYSCORE', units, '-inf', now)
end
local function view(head)
  local all = redis.call('ZRANGE', units, 0, -1, 'WITHSCORES')
  local out = head
  local phantoms = 0
  local returns = {}
  for i = 1, #all, 2 do
    if string.sub(all[i], 1, 1) == 'p' then phantoms = phantoms + 1 end
    returns[#returns + 1] = string.format('%.6f', tonumber(all[i + 1]) - now)
  end
  out[#out + 1] = phantoms
  for i = 1, #returns do out[#out + 1] = returns[i] end
  return out
end
local function keep_alive(period, hold)
  local ms = math.ceil((2 * period + hold) * 1000)
  redis.call('PEXPIRE', units, ms)
  redis.call('PEXPIRE', taken, ms)
  redis.call('PEXPIRE', seq, ms)
end
