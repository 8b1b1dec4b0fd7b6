-- wrk script for bench/run.sh: replays the request templates written by `bench-loadgen gen`,
-- filling in a fresh CloudEvent id (UUID-shaped, random) and a fresh, per-object increasing
-- metadata.resourceVersion on every request, so no request is a duplicate or stale.
--
--   wrk -t2 -c64 -d15s -s bench/events.lua http://127.0.0.1:PORT/ -- FILE.reqs 2
--
-- FILE.reqs holds records "<object> <op> <length>\n<raw HTTP request>"; thread t of T sends the
-- templates of objects with object % T == t, in file order, so each object's events go out in
-- script order from one thread. resourceVersion = base + counter * T + t, base taken from the
-- clock (10^6 per second), so it keeps growing across consecutive wrk runs against one server.

local ID_PLACE = "%%%%%%%%-%%%%-%%%%-%%%%-%%%%%%%%%%%%"
local RV_PLACE = "^^^^^^^^^^^^^^^"

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
      local b = string.find(raw, RV_PLACE, 1, true)
      n = n + 1
      templates[n] = {
        string.sub(raw, 1, a - 1),
        string.sub(raw, a + #ID_PLACE, b - 1),
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
  return t[1] .. id .. t[2] .. rv .. t[3]
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
