-- GET the URL given on the command line (a run's frame or CLI).
dofile((os.getenv("BENCH_WRK_DIR") or "bench/wrk") .. "/report.lua")
