#!lua name=herald
-- SPDX-License-Identifier: BSD-2-Clause
--[[ herald's event log on a Redis stream. KEYS[1] is the stream
({name}:events), KEYS[2] the newest id assigned ({name}:last); the braces
are a hash tag, so Redis Cluster keeps both on one shard. Each event is a
stream entry with the id "<n>-0" and the fields type, topic, data, public
(1 or 0), time (Unix seconds, Redis' clock), id (n again: the mark of an
entry this library added) and, for an update published through the
Mercure endpoint, mercure (its id, retry and topics, one per line). Ids are consecutive integers: one counter for
every herald node and every other publisher. ]]

-- At most this many entries herald did not add are removed in one go; more
-- on top of the stream and it is likely not herald's log at all.
local SWEEP_MAX = 1000

-- The event id of entry e ({id, fields}), or nil if it is not an event.
-- An event has the id "<n>-0" and either the field id = n (written by
-- herald_publish) or n at most the counter: entries from before that
-- field existed are all at or below it (the counter only grows, and each
-- append set it to its newest id), while an entry added with XADD outside
-- this library gets an id above the stream's newest, so above the counter.
local function event_id(e, counter)
  local digits = string.match(e[1], '^(%d+)-0$')
  if not digits then
    return nil
  end
  local n = tonumber(digits)
  if n <= counter then
    return n
  end
  local f = e[2]
  for j = 1, #f - 1, 2 do
    if f[j] == 'id' then
      if f[j + 1] == digits then
        return n
      end
      return nil
    end
  end
  return nil
end

-- The newest event id, and the ids of the entries above it that are not
-- events (newest first; nil if there are more than SWEEP_MAX). The newest
-- event id is the counter, or the newest event in the stream if the
-- counter is behind it (lost in a FLUSH, or a restore of the stream
-- alone); an entry herald did not add never moves it.
local function newest(keys)
  local counter = tonumber(redis.call('GET', keys[2]) or '0')
  local others = {}
  local from, count = '+', 1 -- the newest entry is nearly always an event: read it alone
  while true do
    local batch = redis.call('XREVRANGE', keys[1], from, '-', 'COUNT', count)
    for _, e in ipairs(batch) do
      local n = event_id(e, counter)
      if n then
        return math.max(n, counter), others
      end
      if #others == SWEEP_MAX then
        return counter, nil
      end
      others[#others + 1] = e[1]
    end
    if #batch < count then
      return counter, others
    end
    from, count = '(' .. batch[#batch][1], 64
  end
end

-- Removes the entries above the newest event that are not events, so that
-- herald's next id can follow its newest: Redis takes no id at or below
-- the stream's last one, which stays that of the newest entry ever added
-- until XSETID moves it back. Returns the newest event id and how many
-- entries went, or an error reply if there are too many to remove.
local function sweep(keys)
  local last, others = newest(keys)
  if not others then
    return nil, redis.error_reply('ERR ' .. keys[1] .. ' has more than ' .. SWEEP_MAX ..
      ' entries above id ' .. string.format('%d', last) ..
      ' that herald_publish did not add; remove them (is it herald\'s log?)')
  end
  if #others > 0 then
    for i = 1, #others, 100 do
      redis.call('XDEL', keys[1], unpack(others, i, math.min(i + 99, #others)))
    end
    redis.call('XSETID', keys[1], string.format('%d-0', last))
    redis.log(redis.LOG_WARNING, 'herald: removed ' .. #others .. ' entries from ' .. keys[1] ..
      ' that herald_publish did not add (the first ' .. others[#others] .. '); ids go on from ' ..
      string.format('%d', last))
  end
  return last, #others
end

-- The highest id retention has removed: the first event's id less one, or
-- the newest id when the stream holds no event.
local function pruned_through(keys)
  local counter = tonumber(redis.call('GET', keys[2]) or '0')
  local from, count, seen = '-', 1, 0
  while seen <= SWEEP_MAX do
    local batch = redis.call('XRANGE', keys[1], from, '+', 'COUNT', count)
    for _, e in ipairs(batch) do
      local n = event_id(e, counter)
      if n then
        return n - 1
      end
    end
    if #batch < count then
      break
    end
    seen = seen + #batch
    from, count = '(' .. batch[#batch][1], 64
  end
  return (newest(keys))
end

-- The event the Mercure id mid names in the map (keys[3]) and still in
-- the stream, else 0; a name whose event retention removed is let go.
local function mercure_named(keys, mid)
  local score = redis.call('ZSCORE', keys[3], mid)
  if not score then
    return 0
  end
  local id = tonumber(score)
  local sid = string.format('%d', id)
  if #redis.call('XRANGE', keys[1], sid .. '-0', sid .. '-0') == 0 then
    redis.call('ZREM', keys[3], mid)
    return 0
  end
  return id
end

-- The Mercure form (KEYS[3] the map {name}:mercure: a sorted set of the
-- Mercure updates' ids, each scored by the event it names, the earliest
-- still in the stream; herald_trim keeps it to the stream's events):
-- FCALL herald_publish 3+K <stream> <last> <map> <key 1> ... <key K>
--   mercure WINDOW_S TYPE TOPIC DATA PUBLIC SLOT HASH MID BLOCK [...]
-- MID is the update's id ('' for an event of herald's own, and for an
-- update whose id is made from the log and its number, which no map
-- holds), BLOCK its id line, retry and topics (the entry's field
-- mercure; '' for none). Returns, per event, the
-- triple {outcome, id, earlier}: earlier is the event MID already named
-- (it keeps the id: the earliest wins), else 0.
-- FCALL herald_publish 2 <stream> <last> TYPE TOPIC DATA PUBLIC [...]
-- Appends the events in order with consecutive ids; returns the first.
-- FCALL herald_publish 2+K <stream> <last> <key 1> ... <key K> WINDOW_S
--   TYPE TOPIC DATA PUBLIC SLOT HASH [...]
-- The keyed form: an event whose SLOT is not 0 carries the Idempotency-Key
-- held in KEYS[SLOT] (a string "HASH ID", expiring after WINDOW_S). If that
-- key is there and its event still in the stream, nothing is added for it:
-- the same HASH replays the event's id, another one is a conflict.
-- Otherwise the event is added and the key set. Returns, per event, the
-- pair {1 stored | 2 replayed | 3 conflict, id}. Two events of one call
-- with the same key make one event.
-- All or nothing: everything is checked before the first write.
local function publish(keys, args)
  local mercure = args[1] == 'mercure'
  local keyed = #keys > 2
  local window, base, per, first_slot = nil, 0, 4, 3
  if mercure then
    if #keys < 3 then
      return redis.error_reply('ERR herald_publish: the mercure form names the map as its third key')
    end
    table.remove(args, 1)
    first_slot = 4
  end
  if keyed then
    window = tonumber(args[1])
    if not window or window < 1 then
      return redis.error_reply('ERR herald_publish: WINDOW_S must be a positive number of seconds')
    end
    base, per = 1, mercure and 8 or 6
  end
  if #args == base or (#args - base) % per ~= 0 then
    return redis.error_reply('ERR herald_publish takes TYPE TOPIC DATA PUBLIC for each event' ..
      (keyed and ' (and SLOT HASH, after WINDOW_S, with keys)' or '') ..
      (mercure and ' (and MID BLOCK)' or ''))
  end
  local n = (#args - base) / per
  for i = 0, n - 1 do
    local o = base + i * per
    local t, p = args[o + 1], args[o + 4]
    if t == '' or string.find(t, '[\r\n]') then
      return redis.error_reply('ERR event ' .. (i + 1) .. ': TYPE must be non-empty, on one line')
    end
    if string.find(args[o + 2], '[\r\n]') then
      return redis.error_reply('ERR event ' .. (i + 1) .. ': TOPIC must be on one line')
    end
    if p ~= '0' and p ~= '1' then
      return redis.error_reply('ERR event ' .. (i + 1) .. ': PUBLIC is 1 or 0')
    end
    if keyed then
      local slot = tonumber(args[o + 5])
      if not slot or slot ~= math.floor(slot) or (slot > 0 and slot < first_slot) or slot < 0 or slot > #keys then
        return redis.error_reply('ERR event ' .. (i + 1) .. ': SLOT is 0 or the index of an Idempotency-Key\'s key')
      end
    end
    if mercure and string.find(args[o + 7], '[\r\n]') then
      return redis.error_reply('ERR event ' .. (i + 1) .. ': MID must be on one line')
    end
  end
  local last, err = sweep(keys)
  if not last then
    return err
  end
  local next_id = last + 1
  local now = redis.call('TIME')[1]
  local gone_through -- ids at or below it were removed by retention (read once, if needed)
  local out = {}
  for i = 0, n - 1 do
    local o = base + i * per
    local slot = keyed and tonumber(args[o + 5]) or 0
    local outcome = 1
    local id, earlier = nil, 0
    if slot > 0 then
      local seen = redis.call('GET', keys[slot])
      if seen then
        local hash, sid = string.match(seen, '^(%S+) (%d+)$')
        sid = tonumber(sid)
        if sid then
          gone_through = gone_through or pruned_through(keys)
          if sid > gone_through then
            id = sid
            outcome = (hash == args[o + 6]) and 2 or 3
          end
        end
      end
    end
    if not id then
      id = next_id
      next_id = next_id + 1
      local sid = string.format('%d', id)
      local add = { 'XADD', keys[1], sid .. '-0', 'type', args[o + 1], 'topic', args[o + 2], 'data',
        args[o + 3], 'public', args[o + 4], 'time', now, 'id', sid }
      local mid = mercure and args[o + 7] or ''
      if mercure and args[o + 8] ~= '' then
        add[#add + 1] = 'mercure'
        add[#add + 1] = args[o + 8]
      end
      if mid ~= '' then
        earlier = mercure_named(keys, mid)
      end
      if id > last + 1 then
        redis.call(unpack(add))
      else
        local r = redis.pcall(unpack(add))
        if type(r) == 'table' and r.err then
          if not string.find(r.err, 'equal or smaller', 1, true) then
            return r
          end
          -- An entry added and deleted again outside herald left the
          -- stream's last id above the newest event: move it back.
          redis.call('XSETID', keys[1], string.format('%d-0', last))
          redis.call(unpack(add))
        end
      end
      if slot > 0 then
        redis.call('SET', keys[slot], args[o + 6] .. ' ' .. sid, 'EX', window)
      end
      if mid ~= '' and earlier == 0 then
        redis.call('ZADD', keys[3], id, mid)
      end
    end
    out[#out + 1] = outcome
    out[#out + 1] = id
    if mercure then
      out[#out + 1] = earlier
    end
  end
  if next_id > last + 1 then
    redis.call('SET', keys[2], string.format('%d', next_id - 1))
  end
  if not keyed and not mercure then
    return last + 1
  end
  return out
end

-- FCALL herald_sweep 2 <stream> <last>
-- Called by a node whose reader met an entry above the counter without the
-- mark: removes such entries (as herald_publish does before it appends).
-- Returns {newest event id, entries removed}.
local function sweep_call(keys)
  local last, removed = sweep(keys)
  if not last then
    return removed
  end
  return { last, removed }
end

-- FCALL herald_trim 2 <stream> <last> [<map>] MAX_COUNT MAX_AGE_S STEP
-- Removes entries beyond the newest MAX_COUNT and, among the oldest STEP,
-- those older than MAX_AGE_S (0 = no limit), and from the Mercure map
-- (when named) the ids of the events gone. Returns {removed, pruned_through}.
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
  local through = pruned_through(keys)
  if keys[3] then
    redis.call('ZREMRANGEBYSCORE', keys[3], '-inf', through)
  end
  return { removed, through }
end

-- The namespace (its index in pats, 1-based; 0: the defaults) of a topic:
-- the longest pattern that matches it, an exact topic or a subtree
-- "prefix/*" (every topic under prefix/, at any depth).
local function namespace_of(pats, topic)
  local best, best_len = 0, 0
  for i, p in ipairs(pats) do
    local n = #p
    if n > best_len then
      local hit
      if string.sub(p, -2) == '/*' then
        hit = #topic > n - 1 and string.sub(topic, 1, n - 1) == string.sub(p, 1, n - 1)
      else
        hit = topic == p
      end
      if hit then
        best, best_len = i, n
      end
    end
  end
  return best
end

local function field(e, name)
  local f = e[2]
  for j = 1, #f - 1, 2 do
    if f[j] == name then
      return f[j + 1]
    end
  end
  return nil
end

-- FCALL herald_trim_ns 4 <stream> <last> <map> <state> STEP N
--   [PATTERN MAX_COUNT MAX_AGE_S] * (N + 1), the defaults' first (PATTERN '')
-- Retention kept per namespace, so that a chatty family of topics never
-- removes a quiet one's events. The state hash (KEYS[4]) is shared by
-- every node: the patterns it counts by, the entry counted through, and
-- per namespace its count of events, the id below which none of it is
-- left (low) and the highest id of it removed (pruned). A call counts up
-- to STEP new entries and removes, per namespace, from its oldest up, up
-- to STEP entries past its MAX_COUNT or older than MAX_AGE_S (0: no
-- limit). Returns {removed, more (1: entries left to visit), pruned
-- through of the whole log, pruned per namespace...}.
local function trim_ns(keys, args)
  local step, n = tonumber(args[1]), tonumber(args[2])
  local pats, rules, sig = {}, {}, ''
  for i = 0, n do
    local b = 3 + 3 * i
    local pat = args[b]
    if i > 0 then pats[i] = pat end
    rules[i] = { count = tonumber(args[b + 1]) or 0, age = tonumber(args[b + 2]) or 0, pat = pat }
    sig = sig .. pat .. '\n'
  end
  local counter = tonumber(redis.call('GET', keys[2]) or '0')
  local st = keys[4]
  if redis.call('HGET', st, 'patterns') ~= sig then
    -- Another division of topics: count afresh; what each namespace lost
    -- stays (by pattern), with the log's oldest loss as the floor.
    local floor = pruned_through(keys)
    local old = redis.call('HGETALL', st)
    local kept = {}
    for j = 1, #old - 1, 2 do
      if string.sub(old[j], 1, 2) == 'p:' then kept[old[j]] = old[j + 1] end
    end
    redis.call('DEL', st)
    redis.call('HSET', st, 'patterns', sig, 'counted', '0')
    for i = 0, n do
      local p = rules[i].pat
      redis.call('HSET', st, 'p:' .. p, kept['p:' .. p] or string.format('%d', floor), 'c:' .. p, '0', 'l:' .. p, '0')
    end
  end
  local counted = tonumber(redis.call('HGET', st, 'counted') or '0')
  local counts, lows, pruned = {}, {}, {}
  for i = 0, n do
    local p = rules[i].pat
    counts[i] = tonumber(redis.call('HGET', st, 'c:' .. p) or '0')
    lows[i] = tonumber(redis.call('HGET', st, 'l:' .. p) or '0')
    pruned[i] = tonumber(redis.call('HGET', st, 'p:' .. p) or '0')
  end
  local more = 0
  -- Count what came since.
  local batch = redis.call('XRANGE', keys[1], string.format('(%d-0', counted), '+', 'COUNT', step)
  for _, e in ipairs(batch) do
    local id = event_id(e, counter)
    if id then
      local i = namespace_of(pats, field(e, 'topic') or '')
      counts[i] = counts[i] + 1
      counted = id
    end
  end
  if #batch == step then more = 1 end
  local removed, now = 0, tonumber(redis.call('TIME')[1])
  for i = 0, n do
    local r = rules[i]
    local excess = r.count > 0 and counts[i] - r.count or 0
    local cutoff = r.age > 0 and now - r.age or nil
    if excess > 0 or cutoff then
      local gone = {}
      local rows = redis.call('XRANGE', keys[1], string.format('(%d-0', lows[i]),
        string.format('%d-0', counted), 'COUNT', step)
      for _, e in ipairs(rows) do
        local id = event_id(e, counter)
        if id then
          if namespace_of(pats, field(e, 'topic') or '') ~= i then
            lows[i] = id
          else
            local t = tonumber(field(e, 'time') or '')
            if excess <= 0 and not (cutoff and t and t < cutoff) then
              break
            end
            gone[#gone + 1] = e[1]
            excess = excess - 1
            lows[i] = id
            if id > pruned[i] then pruned[i] = id end
          end
        end
      end
      if #rows == step then more = 1 end
      for j = 1, #gone, 100 do
        redis.call('XDEL', keys[1], unpack(gone, j, math.min(j + 99, #gone)))
      end
      counts[i] = counts[i] - #gone
      removed = removed + #gone
    end
  end
  local least, most = nil, 0
  local out = { removed, more, 0 }
  for i = 0, n do
    local p = rules[i].pat
    redis.call('HSET', st, 'c:' .. p, string.format('%d', counts[i]), 'l:' .. p, string.format('%d', lows[i]),
      'p:' .. p, string.format('%d', pruned[i]))
    least = least and math.min(least, lows[i]) or lows[i]
    most = math.max(most, pruned[i])
    out[#out + 1] = pruned[i]
  end
  redis.call('HSET', st, 'counted', string.format('%d', counted))
  out[3] = most
  -- Every event at or below every namespace's low is gone: the Mercure
  -- map's ids of those go too.
  if keys[3] and least and least > 0 then
    redis.call('ZREMRANGEBYSCORE', keys[3], '-inf', least)
  end
  return out
end

-- FCALL herald_mercure_find 3 <stream> <last> <map> MID
-- The event the Mercure update id MID names (the earliest still in the
-- stream), as XRANGE gives an entry ({id, {field, value, ...}}), or 0.
local function mercure_find(keys, args)
  local id = mercure_named(keys, args[1] or '')
  if id == 0 then
    return 0
  end
  local sid = string.format('%d', id)
  return redis.call('XRANGE', keys[1], sid .. '-0', sid .. '-0')[1]
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
redis.register_function('herald_sweep', sweep_call)
redis.register_function('herald_trim', trim)
redis.register_function('herald_trim_ns', trim_ns)
redis.register_function('herald_floor', floor)
redis.register_function('herald_mercure_find', mercure_find)
