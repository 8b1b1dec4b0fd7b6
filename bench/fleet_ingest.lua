-- wrk script for bench/fleet-readers.sh: updates of the compared ConfigMaps of cluster prod-a
-- (cm-0 .. cm-N-1 in namespace bench), each with a new value and a higher resourceVersion, so
-- every event changes the fleet state the view shows.
--
--   wrk -t1 -c8 -d20s --latency -s bench/fleet_ingest.lua http://127.0.0.1:PORT/ -- OBJECTS
--
-- One thread only: the counter makes ids and resourceVersions unique; the base comes from the
-- clock (10^6 per second) so it keeps growing across consecutive runs against one server.

local counter = 0
local objects = 5000
local base = 0
local run = 0

function init(args)
  objects = tonumber(args[1]) or 5000
  base = (os.time() - 1700000000) * 1000000
  math.randomseed(os.time())
  run = math.random(1, 1000000000)
end

local TEMPLATE = '{"specversion":"1.0","id":"ingest-%d-%d","source":"https://10.96.0.1:443",'
  .. '"type":"dev.knative.apiserver.resource.update",'
  .. '"subject":"/api/v1/namespaces/bench/configmaps/cm-%d","datacontenttype":"application/json",'
  .. '"cluster":"prod-a","apiversion":"v1","kind":"ConfigMap","name":"cm-%d","namespace":"bench",'
  .. '"data":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm-%d","namespace":"bench",'
  .. '"uid":"prod-a-cm-%d","resourceVersion":"%d"},"data":{"key":"v%d","other":"same"}}}'

function request()
  counter = counter + 1
  local k = counter % objects
  local body = string.format(TEMPLATE, run, counter, k, k, k, k, base + counter, counter)
  return wrk.format("POST", "/", { ["content-type"] = "application/cloudevents+json" }, body)
end
