-- The budget's rule (ledger.py) on KEYS: our units by return time and by take time
-- (sorted sets), phantom blocks by return time (a sorted set), their counts (a hash,
-- with the total under "all") and the server's remaining in our units' answers (a hash).
-- ARGV[1] names the operation: take or settle. Every call answers counts and the next
-- return, never every unit.
pcall(redis.replicate_commands)
local units, taken, blocks, sizes, heard = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local limit, period = tonumber(ARGV[2]), tonumber(ARGV[3])

local function fmt(x) return string.format('%.17g', x) end
local function phantoms() return tonumber(redis.call('HGET', sizes, 'all') or '0') end
local function soonest(key)
  local r = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  if r[2] then return tonumber(r[2]) end
  return nil
end

local function expire()
  local gone = redis.call('ZRANGEBYSCORE', units, '-inf', now)
  if #gone > 0 then
    for i = 1, #gone do
      redis.call('ZREM', taken, gone[i])
      redis.call('HDEL', heard, gone[i])
    end
    redis.call('ZREMRANGEBYSCORE', units, '-inf', now)
  end
  local due = redis.call('ZRANGEBYSCORE', blocks, '-inf', now)
  if #due > 0 then
    local n = 0
    for i = 1, #due do
      n = n + tonumber(redis.call('HGET', sizes, due[i]))
      redis.call('HDEL', sizes, due[i])
    end
    redis.call('HINCRBY', sizes, 'all', -n)
    redis.call('ZREMRANGEBYSCORE', blocks, '-inf', now)
  end
end

local function add(at, count)
  if count > 0 then
    redis.call('ZADD', blocks, at, fmt(at))
    redis.call('HINCRBY', sizes, fmt(at), count)
    redis.call('HINCRBY', sizes, 'all', count)
  end
end

-- The n-th soonest return (1-based) of every unit out, phantoms included.
local function nth(n)
  local list = redis.call('ZRANGE', blocks, 0, -1, 'WITHSCORES')
  local before = 0
  for i = 1, #list, 2 do
    local at = tonumber(list[i + 1])
    local sooner = redis.call('ZCOUNT', units, '-inf', '(' .. fmt(at))
    if sooner + before >= n then break end
    local count = tonumber(redis.call('HGET', sizes, list[i]))
    if sooner + before + count >= n then return at end
    before = before + count
  end
  local r = redis.call('ZRANGE', units, n - before - 1, n - before - 1, 'WITHSCORES')
  if r[2] then return tonumber(r[2]) end
  return now + period
end

local function hand_back(give)
  local list = redis.call('ZREVRANGE', blocks, 0, -1)
  local gone = 0
  for i = 1, #list do
    if give <= 0 then break end
    local held = tonumber(redis.call('HGET', sizes, list[i]))
    local n = math.min(held, give)
    if n == held then
      redis.call('ZREM', blocks, list[i])
      redis.call('HDEL', sizes, list[i])
    else
      redis.call('HINCRBY', sizes, list[i], -n)
    end
    gone = gone + n
    give = give - n
  end
  -- Nothing given: -0 is no integer to Redis.
  if gone > 0 then redis.call('HINCRBY', sizes, 'all', -gone) end
end

local function heed_server(taken_at, remaining)
  local ours, held = redis.call('ZCARD', units), phantoms()
  local free = limit - ours - held
  if held == 0 and free <= remaining - ours then return end
  -- Taken after and not counted first by the server's word (ledger.py's heed_server).
  local after = redis.call('ZRANGEBYSCORE', taken, '(' .. fmt(taken_at), '+inf')
  local allowed = remaining - #after
  for i = 1, #after do
    local seen = redis.call('HGET', heard, after[i])
    if seen and tonumber(seen) > remaining then allowed = allowed + 1 end
  end
  if free > allowed then
    local count = free - math.max(0, allowed)
    if allowed > 0 then
      add(now + period, count)
    else
      local first = soonest(units)
      if first then add(first + period, count)
      else
        add(now + period, 1)
        add(now + 2 * period, count - 1)
      end
    end
  elseif free < allowed then
    hand_back(allowed - free)
  end
end

expire()
local head, hold = nil, 0
if ARGV[1] == 'take' then
  local keep, unit = tonumber(ARGV[5]), ARGV[6]
  hold = tonumber(ARGV[4])
  local in_use = redis.call('ZCARD', units) + phantoms()
  if limit - in_use > keep then
    redis.call('ZADD', units, now + period + hold, unit)
    redis.call('ZADD', taken, now, unit)
    head = {1, fmt(now), '0'}
  else
    local at = nth(in_use - (limit - keep - 1))
    head = {0, fmt(now), fmt(math.max(0, at - now))}
  end
else
  local unit, taken_at, sent, remaining = ARGV[4], tonumber(ARGV[5]), ARGV[6] == '1', ARGV[7]
  if not sent then
    redis.call('ZREM', units, unit)
    redis.call('ZREM', taken, unit)
  else
    local current = redis.call('ZSCORE', units, unit)
    if current and tonumber(current) > now + period then
      redis.call('ZADD', units, now + period, unit)
    end
    if current and remaining ~= '' then redis.call('HSET', heard, unit, remaining) end
    if remaining ~= '' then heed_server(taken_at, tonumber(remaining)) end
  end
  head = {}
end
local ms = math.ceil((2 * period + hold) * 1000)
for i = 1, 5 do redis.call('PEXPIRE', KEYS[i], ms) end
local a, b = soonest(units), soonest(blocks)
if b and (not a or b < a) then a = b end
head[#head + 1] = redis.call('ZCARD', units) + phantoms()
head[#head + 1] = phantoms()
head[#head + 1] = a and fmt(a - now) or ''
return head
