-- POST /runs {} : start a run of the served default workflow.
dofile((os.getenv("BENCH_WRK_DIR") or "bench/wrk") .. "/report.lua")
wrk.method = "POST"
wrk.body = "{}"
wrk.headers["Content-Type"] = "application/json"
