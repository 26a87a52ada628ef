-- wrk script for bench/entitlements/run.sh: GET /v1/users/{random user}/entitlements with the app key.
-- BENCH_USERS (default 100000) bounds the user ids; BENCH_API_KEY is the bearer key.
local users = tonumber(os.getenv("BENCH_USERS") or "100000")
local headers = { ["Authorization"] = "Bearer " .. (os.getenv("BENCH_API_KEY") or "") }

function init(args)
    math.randomseed(os.time() + tonumber(tostring({}):match("0x(%x+)") or "0", 16))
end

function request()
    return wrk.format("GET", "/v1/users/" .. math.random(1, users) .. "/entitlements", headers)
end
