-- Shared by the bench/wrk scripts: after the run, print one machine-readable
-- line that bench/run parses:
--   RESULT requests=N duration_us=N rps=F p50_us=N p90_us=N p99_us=N max_us=N non2xx=N errors=N mean_us=N
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "RESULT requests=%d duration_us=%d rps=%.1f p50_us=%d p90_us=%d p99_us=%d max_us=%d non2xx=%d errors=%d mean_us=%d\n",
    summary.requests, summary.duration, summary.requests / (summary.duration / 1e6),
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max,
    e.status, e.connect + e.read + e.write + e.timeout, latency.mean))
end
