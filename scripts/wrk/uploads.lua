-- wrk script: profile uploads (POST /v1/profiles), every one a distinct perfcast_jsonl file of operator samples,
-- sent with a write key and paced (each connection waits `delay_ms` between requests) so that the key stays
-- under its rate limit. Used by scripts/load while predictions run.
--   wrk -t1 -c2 -d30s --latency -s scripts/wrk/uploads.lua URL -- KEY DELAY_MS NONCE [ROWS]
-- done() prints `RESULT {json}` like bodies.lua, plus the count of every status code seen.

local threads = {}
local next_id = 0

function setup(thread)
  thread:set("id", next_id)
  next_id = next_id + 1
  table.insert(threads, thread)
end

local key, delay_ms, nonce, rows
local n = 0
statuses = {}

function init(args)
  key = assert(args[1], "key")
  delay_ms = tonumber(args[2] or "100")
  nonce = args[3] or tostring(os.time())
  rows = tonumber(args[4] or "20")
end

local ops = {
  { "linear", '{"B": 1, "M": %d, "N": %d, "K": %d}' },
  { "bmm", '{"B": 32, "M": %d, "N": %d, "K": %d}' },
}

function request()
  n = n + 1
  local lines = {}
  for r = 1, rows do
    local op = ops[(n + r) % #ops + 1]
    local m, nn, k = 256 * (1 + (n * 7 + r) % 32), 128 * (1 + (n + r * 3) % 48), 128 * (1 + (n * 5 + r) % 40)
    local t = m * nn * k * 2 / 150e6 * (1.1 + ((n * 13 + r) % 17) / 50)
    lines[#lines + 1] = string.format(
      '{"op": "%s", "phase": "fwd", "dtype": "fp16", "gpu": "A100-SXM4-40GB", "dims": ' .. op[2] ..
      ', "time_us": %.3f, "attributes": {"load": "%s-%d-%d"}}', op[1], m, nn, k, t, nonce, id, n)
  end
  local path = string.format("/v1/profiles?format=perfcast_jsonl&ci_run=load-%s-%d-%d", nonce, id, n)
  return wrk.format("POST", path, { ["Authorization"] = "Bearer " .. key }, table.concat(lines, "\n") .. "\n")
end

function delay()
  return delay_ms
end

function response(status, _, _)
  statuses[status] = (statuses[status] or 0) + 1
end

function done(summary, latency, _)
  local s = summary.duration / 1e6
  local e = summary.errors
  local counts = {}
  for _, t in ipairs(threads) do
    for status, c in pairs(t:get("statuses")) do counts[status] = (counts[status] or 0) + c end
  end
  local parts = {}
  for status, c in pairs(counts) do parts[#parts + 1] = string.format('"%d": %d', status, c) end
  io.write(string.format(
    'RESULT {"requests": %d, "duration_s": %.3f, "rps": %.1f, "p50_ms": %.3f, "p90_ms": %.3f, "p99_ms": %.3f, ' ..
    '"max_ms": %.3f, "mean_ms": %.3f, "non2xx": %d, "connect": %d, "read": %d, "write": %d, "timeout": %d, ' ..
    '"statuses": {%s}}\n',
    summary.requests, s, summary.requests / s, latency:percentile(50) / 1e3, latency:percentile(90) / 1e3,
    latency:percentile(99) / 1e3, latency.max / 1e3, latency.mean / 1e3, e.status, e.connect, e.read, e.write,
    e.timeout, table.concat(parts, ", ")))
end
