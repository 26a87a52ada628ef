-- wrk: one admin grant per request, each to a user of its own, so every request changes a user and writes one
-- webhook event. wrk's arguments after `--`: the admin key, and a prefix no other wrk of the run uses.
local counter = 0
local prefix

function init(args)
    wrk.method = "POST"
    wrk.headers["Authorization"] = "Bearer " .. args[1]
    wrk.headers["Content-Type"] = "application/json"
    wrk.body = '{"entitlement": "premium", "reason": "bench"}'
    prefix = "bench-" .. args[2] .. "-"
end

function request()
    counter = counter + 1
    return wrk.format(nil, "/v1/admin/users/" .. prefix .. counter .. "/grants")
end
