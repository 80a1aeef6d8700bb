"""The Lua scripts of ``RedisRunBus`` (``_bus_redis``): each runs atomically
in Redis, so a lease is checked and used in one step, and a dead replica's
run is marked failed once.

Keys of a run ``K`` (``KEYS`` in each script's comment): ``K:lease``,
``K:frames``, ``K:lost``, ``K:attached`` (a hash: replica -> how many of its
clients read the run), ``K:start`` (``"<entry id> <n>"``: the end entry of the
key's previous log, after which its newest log begins; absent for a key's
first log), and ``<prefix>replicas`` (a sorted set: replica -> when its
heartbeat expires, in ms on Redis's clock, renewed with its leases).
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "ATTACH",
    "ATTACHED",
    "CLOSE",
    "DETACH",
    "HAND_OVER",
    "OPEN",
    "PUBLISH",
    "REAP",
    "RENEW",
    "RENEW_ALL",
    "TAKE",
]

# Redis's clock, in ms (``TIME``: allowed in scripts since Redis 5, which
# replicates a script's effects rather than the script).
_NOW: Final = """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
"""

# The last entry of KEYS[2] (frames): its id (false for none), its number
# and whether it is an end entry.
_LAST: Final = """
local last_id, n, ended = false, 0, false
local last = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)
if #last > 0 then
  last_id = last[1][1]
  local fields = last[1][2]
  for i = 1, #fields, 2 do
    if fields[i] == 'end' then ended = true end
    if fields[i] == 'n' then n = tonumber(fields[i + 1]) end
  end
end
"""

# After _LAST: append the lost frames (KEYS[3]) and the end, numbered on.
_WRITE_LOST: Final = """
for _, frame in ipairs(redis.call('LRANGE', KEYS[3], 0, -1)) do
  n = n + 1
  redis.call('XADD', KEYS[2], '*', 'n', n, 'f', frame)
end
n = n + 1
last_id = redis.call('XADD', KEYS[2], '*', 'n', n, 'end', '1')
redis.call('DEL', KEYS[3])
"""

# After _LAST, for a log that never ended: a durable run's log (it has no
# lost frames: its run goes on in the log that follows) ends with a ``moved``
# end, which a follower reads on past; any other gets its lost frames and end.
_END_UNENDED: Final = (
    """
if redis.call('EXISTS', KEYS[3]) == 0 then
  n = n + 1
  last_id = redis.call('XADD', KEYS[2], '*', 'n', n, 'end', '1', 'moved', '1')
else
"""
    + _WRITE_LOST
    + """
end
"""
)

# The rest of OPEN and TAKE, once the lease is taken.
_BEGIN_LOG: Final = (
    _LAST
    + """
if last_id then
  if not ended then
"""
    + _END_UNENDED
    + """
  end
  redis.call('PERSIST', KEYS[2])
  redis.call('PERSIST', KEYS[4])
  redis.call('SET', KEYS[5], last_id .. ' ' .. n)
else
  redis.call('DEL', KEYS[4], KEYS[5])
end
redis.call('DEL', KEYS[3])
for i = 3, #ARGV do redis.call('RPUSH', KEYS[3], ARGV[i]) end
return n + 1
"""
)

# KEYS: lease, frames, lost, attached, start; ARGV: replica, lease ms, lost
# frames... Takes the lease (SET NX) and begins the key's new log: after the
# end of the key's previous log when it is still kept (numbered on from it;
# a previous log whose replica died unreaped gets its lost frames and end
# first, a durable run's log its ``moved`` end), else in a new stream from 1.
# Returns the number of the new log's first frame, or 0 when the key's log is
# open (its lease held).
OPEN: Final = (
    """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) == false then
  return 0
end
"""
    + _BEGIN_LOG
)

# As OPEN, but the lease is taken even when another replica holds it: a
# durable run taken over (the store's compare-and-set decided who owns the
# run; a lease in Redis that says otherwise is a dead replica's, not expired
# yet). The replica that held it fails its next publish.
TAKE: Final = (
    """
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
"""
    + _BEGIN_LOG
)

# KEYS: lease, lost; ARGV: replica. A durable run handed over: the lease goes
# (another replica takes the run at once) and the log stays open, for the
# taker to end with ``moved`` and go on after.
HAND_OVER: Final = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1], KEYS[2])
return 1
"""

# KEYS: lease, frames, lost; ARGV: replica, lease ms, lost frames...
# Renews the lease; re-takes it when Redis lost it (a restart without
# persistence) unless the run was ended or reaped meanwhile.
RENEW: Final = """
local owner = redis.call('GET', KEYS[1])
if owner == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if owner then return 0 end
if redis.call('EXISTS', KEYS[3]) == 0 and redis.call('EXISTS', KEYS[2]) == 1 then
  return 0
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
if redis.call('EXISTS', KEYS[3]) == 0 then
  for i = 3, #ARGV do redis.call('RPUSH', KEYS[3], ARGV[i]) end
end
return 1
"""

# KEYS: the replicas, then every lease this replica holds; ARGV: replica,
# lease ms. The replica's heartbeat and all its leases in one call (a replica
# with a thousand runs renews in one round trip); returns the 1-based indices
# (among the leases) of the leases not renewed.
RENEW_ALL: Final = (
    _NOW
    + """
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('(%d', now))
local missed = {}
for i = 2, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[1] then
    redis.call('PEXPIRE', KEYS[i], ARGV[2])
  else
    table.insert(missed, i - 1)
  end
end
return missed
"""
)

# KEYS: attached, replicas; ARGV: replica, lease ms. One more client of this
# replica reads the run (and the replica's heartbeat is fresh: a Redis that
# lost it, restarted, counts the client at once).
ATTACH: Final = (
    _NOW
    + """
redis.call('HINCRBY', KEYS[1], ARGV[1], 1)
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), ARGV[1])
return 1
"""
)

# KEYS: attached; ARGV: replica. One client fewer.
DETACH: Final = """
if redis.call('HINCRBY', KEYS[1], ARGV[1], -1) <= 0 then
  redis.call('HDEL', KEYS[1], ARGV[1])
end
return 1
"""

# KEYS: attached, replicas. How many clients read the run on replicas whose
# heartbeat has not expired: a dead replica's clients stop counting (and
# count again should its heartbeat come back).
ATTACHED: Final = (
    _NOW
    + """
local total = 0
local counts = redis.call('HGETALL', KEYS[1])
for i = 1, #counts, 2 do
  local expires = redis.call('ZSCORE', KEYS[2], counts[i])
  if expires and tonumber(expires) >= now then
    total = total + tonumber(counts[i + 1])
  end
end
return total
"""
)

# KEYS: lease, frames; ARGV: replica, the first frame's number, maxlen,
# frames... Appends the frames in order if the lease is this replica's (one
# round trip for a batch); returns their entry ids, or false.
PUBLISH: Final = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return false end
local first = tonumber(ARGV[2])
local ids = {}
for i = 4, #ARGV do
  ids[#ids + 1] = redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[3], '*',
                             'n', first + i - 4, 'f', ARGV[i])
end
return ids
"""

# KEYS: lease, frames, lost, attached, start; ARGV: replica, n, keep s
CLOSE: Final = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('XADD', KEYS[2], '*', 'n', ARGV[2], 'end', '1')
redis.call('DEL', KEYS[1], KEYS[3])
redis.call('EXPIRE', KEYS[2], ARGV[3])
redis.call('EXPIRE', KEYS[4], ARGV[3])
redis.call('EXPIRE', KEYS[5], ARGV[3])
return 1
"""

# KEYS: lease, frames, lost, attached, start; ARGV: keep s
# The run's replica is gone (no lease) and its log never ended (its lost
# frames are still there; the last entry may be the previous log's end, when
# the run died before its first frame): write them and the end, once.
REAP: Final = (
    """
if redis.call('EXISTS', KEYS[1]) == 1 or redis.call('EXISTS', KEYS[3]) == 0 then
  return 0
end
"""
    + _LAST
    + _WRITE_LOST
    + """
redis.call('EXPIRE', KEYS[2], ARGV[1])
redis.call('EXPIRE', KEYS[4], ARGV[1])
redis.call('EXPIRE', KEYS[5], ARGV[1])
return 1
"""
)
