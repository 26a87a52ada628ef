-- wrk: one admin grant per request, each to a user of its own, so every request changes a user and writes one
-- webhook event. wrk's arguments after `--`: the admin key, a prefix no other wrk of the run uses, and the pause
-- in milliseconds each connection makes between its requests (0: full speed).
local counter = 0
local prefix
local pause = 0

function init(args)
    wrk.method = "POST"
    wrk.headers["Authorization"] = "Bearer " .. args[1]
    wrk.headers["Content-Type"] = "application/json"
    wrk.body = '{"entitlement": "premium", "reason": "bench"}'
    prefix = "bench-" .. args[2] .. "-"
    pause = tonumber(args[3] or "0")
end

function request()
    counter = counter + 1
    return wrk.format(nil, "/v1/admin/users/" .. prefix .. counter .. "/grants")
end

function delay()
    return pause
end
