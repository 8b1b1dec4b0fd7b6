-- wrk script for bench/run.sh: replays the request templates written by `bench-loadgen gen`,
-- filling in a fresh CloudEvent id (UUID-shaped, random), the CloudEvent time (the wall clock
-- when the request is made, UTC, RFC 3339 with nanoseconds, as an ApiServerSource adapter sets
-- it; later on every request of a thread) and a fresh, per-object increasing
-- metadata.resourceVersion on every request, so no request is a duplicate or stale.
--
--   wrk -t2 -c64 -d15s -s bench/events.lua http://127.0.0.1:PORT/ -- FILE.reqs 2
--
-- FILE.reqs holds records "<object> <op> <length>\n<raw HTTP request>"; thread t of T sends the
-- templates of objects with object % T == t, in file order, so each object's events go out in
-- script order from one thread. resourceVersion = base + counter * T + t, base taken from the
-- clock (10^6 per second), so it keeps growing across consecutive wrk runs against one server.
-- The three placeholders have the width of their values (Content-Length stays right) and come in
-- the order id, time, resourceVersion (world.rs, checked by its tests).

local ID_PLACE = "%%%%%%%%-%%%%-%%%%-%%%%-%%%%%%%%%%%%"
local TIME_PLACE = "####-##-##T##:##:##.#########Z"
local RV_PLACE = "^^^^^^^^^^^^^^^"

-- The wall clock with nanoseconds (LuaJIT's ffi; wrk embeds LuaJIT). CLOCK_REALTIME is 0.
local ffi = require("ffi")
ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } events_lua_timespec;
int clock_gettime(int clock_id, events_lua_timespec *tp);
]]
local C = ffi.C
local timespec = ffi.new("events_lua_timespec")
local last_sec, last_nsec = 0, 0
local second_text = ""

-- "YYYY-MM-DDTHH:MM:SS." and "nnnnnnnnnZ": now, never earlier than this thread's last value (the
-- same second and 1 ns more if the clock stood still or stepped back). The date and second are
-- formatted only when the second changes.
local function now()
  C.clock_gettime(0, timespec)
  local sec, nsec = tonumber(timespec.tv_sec), tonumber(timespec.tv_nsec)
  if sec < last_sec or (sec == last_sec and nsec <= last_nsec) then
    sec, nsec = last_sec, last_nsec + 1
    if nsec >= 1000000000 then
      sec, nsec = sec + 1, 0
    end
  end
  if sec ~= last_sec then
    second_text = os.date("!%Y-%m-%dT%H:%M:%S.", sec)
  end
  last_sec, last_nsec = sec, nsec
  return second_text, string.format("%09dZ", nsec)
end

local thread_count = 0
function setup(thread)
  thread:set("tindex", thread_count)
  thread_count = thread_count + 1
end

local templates = {}
local n = 0
local i = 0
local counter = 0
local threads = 1
local base = 0

function init(args)
  local path = args[1]
  threads = tonumber(args[2]) or 1
  local me = tindex or 0
  local file = assert(io.open(path, "rb"))
  local data = file:read("*a")
  file:close()
  local pos = 1
  local size = #data
  while pos <= size do
    local eol = string.find(data, "\n", pos, true)
    local object, op, length = string.match(string.sub(data, pos, eol - 1), "(%d+) (%a) (%d+)")
    object = tonumber(object)
    length = tonumber(length)
    local raw = string.sub(data, eol + 1, eol + length)
    pos = eol + 1 + length
    if object % threads == me then
      local a = string.find(raw, ID_PLACE, 1, true)
      local c = string.find(raw, TIME_PLACE, 1, true)
      local b = string.find(raw, RV_PLACE, 1, true)
      if not (a and c and b and a < c and c < b) then
        error(path .. ": a template without id, time and resourceVersion placeholders in order")
      end
      n = n + 1
      templates[n] = {
        string.sub(raw, 1, a - 1),
        string.sub(raw, a + #ID_PLACE, c - 1),
        string.sub(raw, c + #TIME_PLACE, b - 1),
        string.sub(raw, b + #RV_PLACE),
      }
    end
  end
  math.randomseed(os.time() * 1000 + me)
  base = (os.time() - 1700000000) * 1000000
end

function request()
  i = i + 1
  if i > n then
    i = 1
  end
  counter = counter + 1
  local t = templates[i]
  local id = string.format("%08x-%04x-4%03x-%04x-%012d", math.random(0, 2147483647),
    math.random(0, 65535), math.random(0, 4095), 32768 + (tindex or 0), counter)
  local rv = string.format("%015d", base + counter * threads + (tindex or 0))
  local second, fraction = now()
  return t[1] .. id .. t[2] .. second .. fraction .. t[3] .. rv .. t[4]
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "WRKJSON {\"requests\":%d,\"duration_us\":%d,\"bytes\":%d,\"connect\":%d,\"read\":%d," ..
    "\"write\":%d,\"status\":%d,\"timeout\":%d,\"p50_us\":%d,\"p90_us\":%d,\"p99_us\":%d," ..
    "\"max_us\":%d,\"mean_us\":%.1f}\n",
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status,
    e.timeout, latency:percentile(50), latency:percentile(90), latency:percentile(99),
    latency.max, latency.mean))
end
