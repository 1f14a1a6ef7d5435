-- POST /runs/{id}/transitions/tick {} round-robin over the runs listed,
-- comma-separated, in the environment variable RUN_IDS; with RUN_IDS unset,
-- the URL on the command line names the one run to tick.
dofile((os.getenv("BENCH_WRK_DIR") or "bench/wrk") .. "/report.lua")
wrk.method = "POST"
wrk.body = "{}"
wrk.headers["Content-Type"] = "application/json"

local ids = {}
for id in string.gmatch(os.getenv("RUN_IDS") or "", "[^,]+") do
  ids[#ids + 1] = id
end
local i = 0

if #ids > 0 then
  function init(args)
    -- Threads start at different offsets so they do not tick in lockstep.
    i = math.random(#ids) - 1
  end
  function request()
    i = i % #ids + 1
    return wrk.format(nil, "/runs/" .. ids[i] .. "/transitions/tick")
  end
end
