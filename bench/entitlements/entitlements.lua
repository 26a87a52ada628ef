-- wrk script for bench/entitlements/run.sh: GET /v1/users/{random user}/entitlements with the app key.
-- BENCH_USERS (default 100000) bounds the user ids; BENCH_API_KEY is the bearer key; BENCH_AT, when set, is
-- sent as `?at=` (a read at an instant, which never comes from the service's cache).
local users = tonumber(os.getenv("BENCH_USERS") or "100000")
local query = os.getenv("BENCH_AT") and ("?at=" .. os.getenv("BENCH_AT")) or ""
local headers = { ["Authorization"] = "Bearer " .. (os.getenv("BENCH_API_KEY") or "") }

function init(args)
    math.randomseed(os.time() + tonumber(tostring({}):match("0x(%x+)") or "0", 16))
end

function request()
    return wrk.format("GET", "/v1/users/" .. math.random(1, users) .. "/entitlements" .. query, headers)
end
