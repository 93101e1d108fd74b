-- wrk script: POSTs JSON bodies read from the files given as arguments, in turn (each wrk thread starts at a
-- different one), to the URL's path. Used by scripts/load for training predictions and operator estimates.
--   wrk -t2 -c64 -d30s --latency -s scripts/wrk/bodies.lua URL -- body1.json body2.json ...
-- done() prints one line `RESULT {json}` that scripts/load parses (requests/s, latency percentiles, errors).

local threads = {}
local next_id = 0

function setup(thread)
  thread:set("id", next_id)
  next_id = next_id + 1
  table.insert(threads, thread)
end

local requests = {}
local i = 0

function init(args)
  for _, path in ipairs(args) do
    local f = assert(io.open(path, "rb"))
    local body = f:read("*a")
    f:close()
    requests[#requests + 1] = wrk.format("POST", wrk.path, { ["Content-Type"] = "application/json" }, body)
  end
  assert(#requests > 0, "no body files given")
  i = id % #requests
end

function request()
  i = i % #requests + 1
  return requests[i]
end

function done(summary, latency, _)
  local s = summary.duration / 1e6
  local e = summary.errors
  io.write(string.format(
    'RESULT {"requests": %d, "duration_s": %.3f, "rps": %.1f, "p50_ms": %.3f, "p90_ms": %.3f, "p99_ms": %.3f, ' ..
    '"max_ms": %.3f, "mean_ms": %.3f, "non2xx": %d, "connect": %d, "read": %d, "write": %d, "timeout": %d}\n',
    summary.requests, s, summary.requests / s, latency:percentile(50) / 1e3, latency:percentile(90) / 1e3,
    latency:percentile(99) / 1e3, latency.max / 1e3, latency.mean / 1e3, e.status, e.connect, e.read, e.write,
    e.timeout))
end
