package redisfleet

import "github.com/redis/go-redis/v9"

// The Lua scripts run atomically on the server and take every time from
// the server's clock (TIME), so hosts with skewed clocks agree on run
// leases, stop and block expiries and budget windows. Each returns the
// server's time (ms since the Unix epoch) first, which the process uses to
// estimate its offset from the server's clock.
//
// Every key a script touches is passed in KEYS[] (never built from an
// argument), and the keys of one call share a hash tag (see keys), so each
// script runs in one slot of a Redis Cluster as on one server; the tests
// run every script under a Lua guard that fails on any key not in KEYS[]
// (keyguard_test.go), on one server and on a cluster. A value and its TTL are written inside
// one script (or one SET … PX), never by two calls a crash can split.
// Channels are passed as arguments, never as KEYS, so that ACL key
// patterns need not cover them.

// luaNow is shared by every script: the server's time in ms.
const luaNow = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`

// luaLeases is shared by the lease scripts (budgetScript, treeScript):
// a hash holds, per resource i of n, s<i> (settled usage) and c<i>
// (committed: settled plus the leases held), and per process L:PROCESS =
// "A1 … An EXPIRES", the lease it holds.
//
//   - settle(key, n, at) adds ARGV[at+1..at+n] (usage) to s<i> and
//     ARGV[at+n+1..at+2n] (debt: usage past the lease) less
//     ARGV[at+2n+1..at+3n] (the unused lease returned) to c<i>;
//   - returnDead(key, proc, n) returns to c<i> the leases of processes
//     other than proc that were not renewed before they expired (the
//     process died);
//   - grant(key, i, want, limit, committed) leases want of resource i,
//     or what is left below limit, and returns the grant and the new
//     committed usage;
//   - hold(key, proc, n, held, expires) records what proc holds now, or
//     removes its lease when it holds nothing.
const luaLeases = `
local function fmt(x) return string.format('%.17g', x) end
local function addCommitted(key, i, d)
  local c = tonumber(redis.call('HINCRBYFLOAT', key, 'c' .. i, d))
  if c < 0 then redis.call('HSET', key, 'c' .. i, '0') end
end
local function settle(key, n, at)
  for i = 1, n do
    local used, debt, rel = tonumber(ARGV[at+i]), tonumber(ARGV[at+n+i]), tonumber(ARGV[at+2*n+i])
    if used ~= 0 then redis.call('HINCRBYFLOAT', key, 's' .. i, used) end
    if debt - rel ~= 0 then addCommitted(key, i, debt - rel) end
  end
end
local function returnDead(key, proc, n)
  local h = redis.call('HGETALL', key)
  for j = 1, #h, 2 do
    local f = h[j]
    if string.sub(f, 1, 2) == 'L:' and f ~= proc then
      local a = {}
      for x in string.gmatch(h[j+1], '%S+') do a[#a + 1] = tonumber(x) end
      if #a == n + 1 and a[n+1] < now then
        for i = 1, n do
          if a[i] ~= 0 then addCommitted(key, i, -a[i]) end
        end
        redis.call('HDEL', key, f)
      end
    end
  end
end
local function grant(key, i, want, limit, committed)
  local room = limit - committed
  if want > room then want = room end
  if want <= 0 then return 0, committed end
  return want, tonumber(redis.call('HINCRBYFLOAT', key, 'c' .. i, want))
end
local function hold(key, proc, n, held, expires)
  local v, any = {}, false
  for i = 1, n do
    v[i] = fmt(held[i])
    if held[i] ~= 0 then any = true end
  end
  if any then
    v[n+1] = string.format('%d', expires)
    redis.call('HSET', key, proc, table.concat(v, ' '))
  else
    redis.call('HDEL', key, proc)
  end
end
`

// syncScript registers, renews and removes runs in one round trip.
//
//	KEYS[1]    P{runs}
//	KEYS[2…]   the entries (P{runs}:MEMBER) of the members below, in order,
//	           then the ended records (P{runs}:end:MEMBER)
//	ARGV[1]    lease (ms)
//	ARGV[2]    ended records' TTL (ms)
//	ARGV[3]    the control channel (P ctl)
//	ARGV[4]    n upserts, then n × (member, entry)
//	then       m renewals, then m × member
//	then       d removals, then d × member
//	then       e ended records, then e × (member, record)
//
// A member is a run's escaped id. The ended records (§8: what a run's
// children in other processes end with, or are refused with) are stored
// with their TTL and announced in one message, "end MEMBER...".
//
// Returns {now, missing ids...}: renewed runs whose entry was gone (the
// server lost it: a restart or a failover), which the caller registers
// again.
var syncScript = redis.NewScript(luaNow + `
local lease = tonumber(ARGV[1])
local i, k = 4, 2
local out = {now}
local n = tonumber(ARGV[i]); i = i + 1
for _ = 1, n do
  redis.call('SET', KEYS[k], ARGV[i+1], 'PX', lease)
  redis.call('ZADD', KEYS[1], now + lease, ARGV[i])
  i, k = i + 2, k + 1
end
n = tonumber(ARGV[i]); i = i + 1
for _ = 1, n do
  if redis.call('PEXPIRE', KEYS[k], lease) == 1 then
    redis.call('ZADD', KEYS[1], now + lease, ARGV[i])
  else
    out[#out + 1] = ARGV[i]
  end
  i, k = i + 1, k + 1
end
n = tonumber(ARGV[i]); i = i + 1
for _ = 1, n do
  redis.call('DEL', KEYS[k])
  redis.call('ZREM', KEYS[1], ARGV[i])
  i, k = i + 1, k + 1
end
n = tonumber(ARGV[i]); i = i + 1
if n > 0 then
  local msg = {'end'}
  for _ = 1, n do
    redis.call('SET', KEYS[k], ARGV[i+1], 'PX', ARGV[2])
    msg[#msg + 1] = ARGV[i]
    i, k = i + 2, k + 1
  end
  redis.call('PUBLISH', ARGV[3], table.concat(msg, ' '))
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
return out
`)

// indexScript returns the live members of an index, {now, id...}, for the
// runs (P{runs}), stops (P{stops}) and blocks (P{blocks}); the caller then
// reads their records (INDEX:ID, in the index's slot) with one MGET. It
// only reads (the sync and publish scripts drop lapsed index members), so
// a read-only ACL user can list runs, stops and blocks (it runs with
// EVALSHA_RO, whose keys need read access only).
//
//	KEYS[1]  the index
var indexScript = redis.NewScript(luaNow + `
local out = redis.call('ZRANGEBYSCORE', KEYS[1], now, '+inf')
table.insert(out, 1, now)
return out
`)

// clockScript reads the server's clock, {seconds, microseconds}, on the
// node that serves KEYS[1] (P{runs}: on a cluster every node has a clock of
// its own; the runs' node is the one whose clock run leases follow). It
// touches no key.
var clockScript = redis.NewScript(`
local _ = KEYS[1]
return redis.call('TIME')
`)

// ackScript records a process's confirmations of a stop and the list's
// TTL in one step.
//
//	KEYS[1]  P{stops}:ack:ID
//	ARGV[1]  TTL (ms)
//	ARGV[2…] confirmations
var ackScript = redis.NewScript(`
redis.call('RPUSH', KEYS[1], unpack(ARGV, 2))
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1
`)

// publishScript stores a stop or a block and publishes it in one step,
// stamped with the server's time.
//
//	KEYS[1]  index (P{stops} or P{blocks})
//	KEYS[2]  the record's key (P{stops}:ID or P{blocks}:ID)
//	ARGV[1]  kind: "stop" or "block"
//	ARGV[2]  id
//	ARGV[3]  ttl (ms); 0: none (a block without expiry)
//	ARGV[4]  the record (JSON)
//	ARGV[5]  the control channel (P ctl)
//
// The stored value and the message are "KIND ID AT EXPIRES RECORD" (AT and
// EXPIRES in server ms, EXPIRES 0 for none). Returns {now, receivers}.
var publishScript = redis.NewScript(luaNow + `
local ttl = tonumber(ARGV[3])
local expires = 0
if ttl > 0 then expires = now + ttl end
local v = ARGV[1] .. ' ' .. ARGV[2] .. ' ' .. string.format('%d', now) .. ' ' .. string.format('%d', expires) .. ' ' .. ARGV[4]
if ttl > 0 then
  redis.call('SET', KEYS[2], v, 'PX', ttl)
  redis.call('ZADD', KEYS[1], expires, ARGV[2])
else
  redis.call('SET', KEYS[2], v)
  redis.call('ZADD', KEYS[1], '+inf', ARGV[2])
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local r = redis.call('PUBLISH', ARGV[5], v)
return {now, r}
`)

// unblockScript removes blocks and publishes each removal.
//
//	KEYS[1]    P{blocks}
//	KEYS[2…]   the blocks' keys (P{blocks}:ID), in the order of the ids
//	ARGV[1]    the control channel (P ctl)
//	ARGV[2…]   block ids (escaped)
//
// Returns {now, removed}.
var unblockScript = redis.NewScript(luaNow + `
local removed = 0
for i = 2, #ARGV do
  local id = ARGV[i]
  local gone = redis.call('DEL', KEYS[i])
  local was = redis.call('ZREM', KEYS[1], id)
  if gone == 1 or was == 1 then
    removed = removed + 1
    redis.call('PUBLISH', ARGV[1], 'unblock ' .. id)
  end
end
return {now, removed}
`)

// budgetScript settles a process's usage of one shared budget and reserves
// a new lease, atomically.
//
// A window's hash holds, per resource i (1 total_tokens, 2 input_tokens,
// 3 output_tokens, 4 cost): s<i> the usage settled so far, c<i> the
// committed amount (settled usage plus the leases processes hold), and
// spec (the first run's fleet_budget), ws/we (the window), ex (the
// exhausted resource), exu (the usage it was declared at), pr<i> (pressure
// crossed).
//
//	KEYS[1…]  window keys of the budget (P{budget:ID}:W): the window the
//	          settled usage belongs to, and the windows around the one the
//	          caller estimates current (its estimate of the server's clock
//	          may be a little off)
//	ARGV[1]  the window starts W of KEYS[1…], space-separated, in order
//	ARGV[2]  ID (escaped budget id, for messages)
//	ARGV[3]  spec (canonical JSON of the fleet_budget)
//	ARGV[4]  window (ms)
//	ARGV[5]  grace (ms): a window's key lives this long after its end
//	ARGV[6]  the window start the settled usage belongs to (0: the current one)
//	ARGV[7..10]   used since the last settle, per resource
//	ARGV[11..14]  debt: usage past the process's lease, per resource
//	ARGV[15..18]  release: unused lease returned, per resource
//	ARGV[19]      1: reserve in the current window
//	ARGV[20..23]  wanted lease, per resource
//	ARGV[24..27]  1 when the process has no lease left for resource i
//	ARGV[28..31]  limits (0: none)
//	ARGV[32]      pressure fraction (0: none)
//	ARGV[33]      the control channel (P ctl)
//	ARGV[34]      the process's id
//	ARGV[35]      the lease period (ms)
//	ARGV[36..39]  the lease the process still holds, per resource (before this grant)
//
// Each process's lease is recorded in the window as L:PROCESS = "A1 A2 A3
// A4 EXPIRES" and renewed by each of its calls (at least every second
// while it has runs of the budget). A lease whose process has not renewed
// it for a lease period (the process died) is returned to the budget by
// the next call of any process.
//
// When the current window (by the server's TIME) is not among KEYS, the
// script changes nothing and returns {now}: the caller corrects its clock
// estimate and calls again. A settled usage whose window has ended more
// than grace ago is dropped (its key is gone: writing it would leave a
// counter without a TTL). The caller adds a new window to P{budgets}
// itself (that index spans budgets, so it is in another slot).
//
// Returns {now, window start, window end, mismatch ("" or the stored spec),
// exhausted resource (0 none), exhausted usage, pressure bitmask (resources
// whose pressure is crossed), g1..g4 (granted), c1..c4 (committed),
// s1..s4 (settled)}. Numbers other than the times are strings.
//
// A budget is exhausted on resource i when the settled usage reaches the
// limit, or when a process that has no lease left asks for more and every
// unit is settled or leased (c >= limit). The first time, the script
// records it and publishes "bex ID WS WE I USED LIMIT"; the first time
// committed usage crosses pressure × limit it publishes "bpr ID WS WE I
// USED LIMIT".
var budgetScript = redis.NewScript(luaNow + luaLeases + `
local id, spec = ARGV[2], ARGV[3]
local window = tonumber(ARGV[4])
local grace = tonumber(ARGV[5])
local keyOf = {}
do
  local j = 1
  for w in string.gmatch(ARGV[1], '%S+') do
    keyOf[tonumber(w)] = KEYS[j]
    j = j + 1
  end
end
local function touch(key, ws)
  if redis.call('HSETNX', key, 'spec', spec) == 1 then
    redis.call('HSET', key, 'ws', string.format('%d', ws), 'we', string.format('%d', ws + window))
    redis.call('PEXPIREAT', key, ws + window + grace)
  end
  return redis.call('HGET', key, 'spec')
end
local ws = now - (now % window)
local key = keyOf[ws]
if not key then return {now} end
local sws = tonumber(ARGV[6])
if sws == 0 then sws = ws end
local skey = keyOf[sws]
if skey and sws + window + grace > now then
  touch(skey, sws)
  settle(skey, 4, 6)
end
local stored = touch(key, ws)
local mismatch = ''
if stored ~= spec then mismatch = stored end
local proc = 'L:' .. ARGV[34]
local leaseMs = tonumber(ARGV[35])
if sws ~= ws and skey and redis.call('EXISTS', skey) == 1 then
  redis.call('HDEL', skey, proc) -- an old window's lease is void
end
-- Leases of processes that stopped renewing them (they died) go back.
returnDead(key, proc, 4)
local g = {0, 0, 0, 0}
local c = {0, 0, 0, 0}
local s = {0, 0, 0, 0}
for i = 1, 4 do
  c[i] = tonumber(redis.call('HGET', key, 'c' .. i) or '0')
  s[i] = tonumber(redis.call('HGET', key, 's' .. i) or '0')
end
local ex = tonumber(redis.call('HGET', key, 'ex') or '0')
local exu = tonumber(redis.call('HGET', key, 'exu') or '0')
local pressure = tonumber(ARGV[32])
if mismatch == '' then
  for i = 1, 4 do
    local limit = tonumber(ARGV[27+i])
    if limit > 0 and ex == 0 then
      if ARGV[19] == '1' then
        g[i], c[i] = grant(key, i, tonumber(ARGV[19+i]), limit, c[i])
      end
      local dry = ARGV[23+i] == '1'
      if s[i] >= limit or (dry and g[i] == 0 and c[i] >= limit) then
        ex = i
        exu = c[i]
        if s[i] > exu then exu = s[i] end
        redis.call('HSET', key, 'ex', i, 'exu', fmt(exu))
        redis.call('PUBLISH', ARGV[33], 'bex ' .. id .. ' ' .. string.format('%d', ws) .. ' ' .. string.format('%d', ws + window) .. ' ' .. i .. ' ' .. fmt(exu) .. ' ' .. fmt(limit))
      end
    end
  end
end
local pmask = 0
if mismatch == '' and pressure > 0 then
  for i = 1, 4 do
    local limit = tonumber(ARGV[27+i])
    if limit > 0 then
      if redis.call('HEXISTS', key, 'pr' .. i) == 1 then
        pmask = pmask + 2 ^ (i - 1)
      elseif c[i] >= pressure * limit then
        redis.call('HSET', key, 'pr' .. i, '1')
        pmask = pmask + 2 ^ (i - 1)
        redis.call('PUBLISH', ARGV[33], 'bpr ' .. id .. ' ' .. string.format('%d', ws) .. ' ' .. string.format('%d', ws + window) .. ' ' .. i .. ' ' .. fmt(c[i]) .. ' ' .. fmt(limit))
      end
    end
  end
end
-- This process's lease: what it holds after this call, until it renews it.
local held = {}
for i = 1, 4 do held[i] = tonumber(ARGV[35+i]) + g[i] end
hold(key, proc, 4, held, now + leaseMs)
return {now, ws, ws + window, mismatch, ex, fmt(exu), pmask,
  fmt(g[1]), fmt(g[2]), fmt(g[3]), fmt(g[4]),
  fmt(c[1]), fmt(c[2]), fmt(c[3]), fmt(c[4]),
  fmt(s[1]), fmt(s[2]), fmt(s[3]), fmt(s[4])}
`)

// treeScript settles a process's usage of one shared tree (docs/spec.md
// §8: a run's tree limits, shared with its descendants in other
// processes) and reserves new leases, atomically. It is budgetScript
// without windows, over the six resources of treeResources (1
// iterations, 2 tool_calls, 3 total_tokens, 4 input_tokens, 5
// output_tokens, 6 cost).
//
// The tree's hash (P{tree:HOLDER}) holds stage ("s" and the holder's
// stage, escaped: never empty) and l<i> (its limits, 0 for none), written once, by the
// holder's process; per resource s<i> (the usage every process settled)
// and c<i> (committed: settled plus the leases processes hold), f<i> (of
// s<i>, what final events spent: the holder feeds it to its evaluator as
// finals); L:PROCESS
// = "A1 … A6 EXPIRES", the lease a process holds, renewed by each of its
// calls (a lease not renewed for a lease period goes back, as for
// budgets); ex and exu (the resource the limits were found spent on, and
// the usage then); end (the holder has ended: nothing more is granted).
//
//	KEYS[1]        P{tree:HOLDER}
//	ARGV[1]        HOLDER (the holder's escaped run id, for messages)
//	ARGV[2]        "s" and the holder's stage, escaped; "" from a process
//	               that only joins the tree: it never creates the record
//	ARGV[3]        the record's TTL (ms), set by the holder's process's calls
//	ARGV[4]        the process's id
//	ARGV[5]        the lease period (ms)
//	ARGV[6]        the control channel (P ctl)
//	ARGV[7]        "e" and the holder's end detail (what its descendants
//	               end with) when it has ended (record end); "0" otherwise
//	ARGV[8..13]    the holder's limits, per resource (with ARGV[2] only)
//	ARGV[14..19]   used since the last settle
//	ARGV[20..25]   debt: usage past the process's lease
//	ARGV[26..31]   release: unused lease returned
//	ARGV[32..37]   wanted lease
//	ARGV[38..43]   the lease the process still holds (before this grant)
//	ARGV[44..49]   the settled usage the holder's process last saw: a
//	               record it creates again (the server lost it) starts
//	               from it
//	ARGV[50..55]   of the usage settled, what final events spent
//	ARGV[56..61]   of the settled usage the holder's process last saw,
//	               what final events spent
//	ARGV[62]       1: the usage settled may fire a limit (it is not only
//	               what final events spent, which counts but never fires
//	               one, §3)
//	ARGV[63]       the tree's hold timeout (ms; 0: it does not hold, its
//	               holder's stage has no hold:), from the holder's process
//	ARGV[64…]      tree warnings of the holder to publish (cause JSON)
//
// A record that does not exist is created only by the holder's process
// (with its TTL, in this script); a joined process's call then changes
// nothing and returns {now, "unknown"}. The holder's process writes the
// limits and the hold flag (hold) with every call: a raise of a held
// tree's limits changes them, and the script then publishes "traise
// HOLDER", so that every process reserves at once and learns them.
// Otherwise, after settling usage that may fire a limit (ARGV[50]), a
// tree that does not hold is exhausted on resource i when its settled
// usage reached the limit (for iterations and tool calls: passed it, as
// a count limit n allows n); the first time, the script records it and
// publishes "tex HOLDER STAGE I USED LIMIT". A tree that holds is never
// exhausted: each process holds its runs of the tree while the settled
// usage it learns reaches a limit; the first time the settled usage
// reaches one (again after each raise), the script records it (hx) and
// publishes "thold HOLDER", so that every process reserves at once and
// learns it (the holder's process charges the holder, whose evaluator
// holds the tree there). The end of the holder of a tree that holds is
// announced likewise, "tend HOLDER". Leases are granted from what is
// neither settled nor leased, unless the tree is exhausted or ended.
//
// Returns {now, "ok", stage, end (0/1), ex (0 none), exu, l1..l6, g1..g6
// (granted), c1..c6, s1..s6, f1..f6, hold (the hold timeout, ms; 0: none),
// end ("e" and the holder's end detail; "" when it has not ended)}.
// Numbers other than now, the flags and hold are strings.
var treeScript = redis.NewScript(luaNow + luaLeases + `
local key, holder, stage = KEYS[1], ARGV[1], ARGV[2]
local proc = 'L:' .. ARGV[4]
local leaseMs = tonumber(ARGV[5])
local exists = redis.call('EXISTS', key) == 1
if not exists and stage == '' then return {now, 'unknown'} end
if stage ~= '' then
  if not exists then
    for i = 1, 6 do
      local b, bf = tonumber(ARGV[43+i]), tonumber(ARGV[55+i])
      if b > 0 then redis.call('HSET', key, 's' .. i, fmt(b), 'c' .. i, fmt(b)) end
      if bf > 0 then redis.call('HSET', key, 'f' .. i, fmt(bf)) end
    end
  end
  local raised = false
  if redis.call('HSETNX', key, 'stage', stage) == 0 then
    for i = 1, 6 do
      if tonumber(redis.call('HGET', key, 'l' .. i) or '0') ~= tonumber(ARGV[7+i]) then raised = true end
    end
  end
  for i = 1, 6 do redis.call('HSET', key, 'l' .. i, ARGV[7+i]) end
  redis.call('HSET', key, 'hold', ARGV[63])
  redis.call('PEXPIRE', key, tonumber(ARGV[3]))
  if raised then
    redis.call('HDEL', key, 'hx')
    redis.call('PUBLISH', ARGV[6], 'traise ' .. holder)
  end
end
settle(key, 6, 13)
for i = 1, 6 do
  local v = tonumber(ARGV[49+i])
  if v ~= 0 then redis.call('HINCRBYFLOAT', key, 'f' .. i, v) end
end
-- Leases of processes that stopped renewing them (they died) go back.
returnDead(key, proc, 6)
if ARGV[7] ~= '0' and redis.call('HSETNX', key, 'end', ARGV[7]) == 1 and tonumber(redis.call('HGET', key, 'hold') or '0') > 0 then
  redis.call('PUBLISH', ARGV[6], 'tend ' .. holder)
end
local ended = redis.call('HEXISTS', key, 'end') == 1
local rstage = redis.call('HGET', key, 'stage') or ''
local limit, c, s, g = {}, {}, {}, {0, 0, 0, 0, 0, 0}
for i = 1, 6 do
  limit[i] = tonumber(redis.call('HGET', key, 'l' .. i) or '0')
  c[i] = tonumber(redis.call('HGET', key, 'c' .. i) or '0')
  s[i] = tonumber(redis.call('HGET', key, 's' .. i) or '0')
end
local ex = tonumber(redis.call('HGET', key, 'ex') or '0')
local exu = tonumber(redis.call('HGET', key, 'exu') or '0')
local holdMs = tonumber(redis.call('HGET', key, 'hold') or '0')
local holds = holdMs > 0
if ex == 0 and ARGV[62] == '1' then
  for i = 1, 6 do
    local hit = limit[i] > 0 and s[i] >= limit[i]
    if i <= 2 then hit = limit[i] > 0 and s[i] > limit[i] end
    if hit and holds then
      if redis.call('HSETNX', key, 'hx', i) == 1 then
        redis.call('PUBLISH', ARGV[6], 'thold ' .. holder)
      end
      break
    elseif hit then
      ex, exu = i, s[i]
      redis.call('HSET', key, 'ex', i, 'exu', fmt(exu))
      redis.call('PUBLISH', ARGV[6], 'tex ' .. holder .. ' ' .. rstage .. ' ' .. i .. ' ' .. fmt(exu) .. ' ' .. fmt(limit[i]))
      break
    end
  end
end
if ex == 0 and not ended then
  for i = 1, 6 do
    if limit[i] > 0 then g[i], c[i] = grant(key, i, tonumber(ARGV[31+i]), limit[i], c[i]) end
  end
end
local held = {}
for i = 1, 6 do held[i] = tonumber(ARGV[37+i]) + g[i] end
hold(key, proc, 6, held, now + leaseMs)
for j = 64, #ARGV do
  redis.call('PUBLISH', ARGV[6], 'twarn ' .. holder .. ' ' .. ARGV[j])
end
local endFlag = 0
if ended then endFlag = 1 end
local out = {now, 'ok', rstage, endFlag, ex, fmt(exu)}
for i = 1, 6 do out[#out + 1] = fmt(limit[i]) end
for i = 1, 6 do out[#out + 1] = fmt(g[i]) end
for i = 1, 6 do out[#out + 1] = fmt(c[i]) end
for i = 1, 6 do out[#out + 1] = fmt(s[i]) end
for i = 1, 6 do out[#out + 1] = fmt(tonumber(redis.call('HGET', key, 'f' .. i) or '0')) end
out[#out + 1] = holdMs
out[#out + 1] = redis.call('HGET', key, 'end') or ''
return out
`)
