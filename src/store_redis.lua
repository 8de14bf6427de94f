#!lua name=herald
--[[ herald's event log on a Redis stream. KEYS[1] is the stream
({name}:events), KEYS[2] the newest id assigned ({name}:last); the braces
are a hash tag, so Redis Cluster keeps both on one shard. Each event is a
stream entry with the id "<n>-0" and the fields type, topic, data, public
(1 or 0) and time (Unix seconds, Redis' clock). Ids are consecutive
integers: one counter for every herald node and every other publisher. ]]

-- The id below which no new entry may go: the counter, or the stream's own
-- last entry if the counter was lost (a FLUSH, a restore of the stream alone).
local function newest(keys)
  local last = tonumber(redis.call('GET', keys[2]) or '0')
  local top = redis.call('XREVRANGE', keys[1], '+', '-', 'COUNT', 1)
  if #top > 0 then
    local n = tonumber(string.match(top[1][1], '^(%d+)-'))
    if n > last then last = n end
  end
  return last
end

-- FCALL herald_publish 2 <stream> <last> TYPE TOPIC DATA PUBLIC [...]
-- Appends the events in order with consecutive ids; returns the first.
-- All or nothing: everything is checked before the first write.
local function publish(keys, args)
  if #args == 0 or #args % 4 ~= 0 then
    return redis.error_reply('ERR herald_publish takes TYPE TOPIC DATA PUBLIC for each event')
  end
  local n = #args / 4
  for i = 0, n - 1 do
    local t, p = args[i * 4 + 1], args[i * 4 + 4]
    if t == '' or string.find(t, '[\r\n]') then
      return redis.error_reply('ERR event ' .. (i + 1) .. ': TYPE must be non-empty, on one line')
    end
    if string.find(args[i * 4 + 2], '[\r\n]') then
      return redis.error_reply('ERR event ' .. (i + 1) .. ': TOPIC must be on one line')
    end
    if p ~= '0' and p ~= '1' then
      return redis.error_reply('ERR event ' .. (i + 1) .. ': PUBLIC is 1 or 0')
    end
  end
  local first = newest(keys) + 1
  local now = redis.call('TIME')[1]
  for i = 0, n - 1 do
    redis.call('XADD', keys[1], string.format('%d-0', first + i), 'type', args[i * 4 + 1], 'topic',
      args[i * 4 + 2], 'data', args[i * 4 + 3], 'public', args[i * 4 + 4], 'time', now)
  end
  redis.call('SET', keys[2], string.format('%d', first + n - 1))
  return first
end

-- The highest id retention has removed: the first entry's id less one, or
-- the newest id when the stream is empty.
local function pruned_through(keys)
  local head = redis.call('XRANGE', keys[1], '-', '+', 'COUNT', 1)
  if #head == 0 then
    return newest(keys)
  end
  return tonumber(string.match(head[1][1], '^(%d+)-')) - 1
end

-- FCALL herald_trim 2 <stream> <last> MAX_COUNT MAX_AGE_S STEP
-- Removes entries beyond the newest MAX_COUNT and, among the oldest STEP,
-- those older than MAX_AGE_S (0 = no limit). Returns {removed, pruned_through}.
local function trim(keys, args)
  local max_count, max_age, step = tonumber(args[1]), tonumber(args[2]), tonumber(args[3])
  local removed = 0
  if max_count and max_count > 0 then
    removed = removed + redis.call('XTRIM', keys[1], 'MAXLEN', max_count)
  end
  if max_age and max_age > 0 and step and step > 0 then
    local cutoff = tonumber(redis.call('TIME')[1]) - max_age
    local old = redis.call('XRANGE', keys[1], '-', '+', 'COUNT', step)
    local keep_from = nil
    for _, e in ipairs(old) do
      local fields, t = e[2], nil
      for j = 1, #fields, 2 do
        if fields[j] == 'time' then t = tonumber(fields[j + 1]) end
      end
      if t == nil or t >= cutoff then
        break
      end
      keep_from = tonumber(string.match(e[1], '^(%d+)-')) + 1
    end
    if keep_from then
      removed = removed + redis.call('XTRIM', keys[1], 'MINID', string.format('%d-0', keep_from))
    end
  end
  return { removed, pruned_through(keys) }
end

-- FCALL herald_floor 2 <stream> <last> ID
-- A node that has seen ID makes sure the counter is not below it (a Redis
-- restarted from an older snapshot would otherwise hand out ids again).
-- Returns {newest before, newest now, pruned_through}.
local function floor(keys, args)
  local seen = tonumber(args[1]) or 0
  local before = newest(keys)
  local now = before
  if seen > before then
    redis.call('SET', keys[2], string.format('%d', seen))
    now = seen
  end
  return { before, now, pruned_through(keys) }
end

redis.register_function('herald_publish', publish)
redis.register_function('herald_trim', trim)
redis.register_function('herald_floor', floor)
