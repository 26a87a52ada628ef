-- wrk: every notification body of a file (the script's first argument) POSTed once, the way Apple posts them; the
-- thread stops when each has been answered "received". Once the bodies run out, connections still waiting for the
-- last answers send GET /healthz (run.sh counts notifications in the database, not wrk's requests).
local bodies, sent, received = {}, 0, 0

function init(args)
    for line in io.lines(args[1]) do bodies[#bodies + 1] = line end
    wrk.headers["Content-Type"] = "application/json"
end

function request()
    if sent >= #bodies then return wrk.format("GET", "/healthz") end
    sent = sent + 1
    return wrk.format("POST", "/v1/notifications/app-store", nil, bodies[sent])
end

function response(status, headers, body)
    if status == 200 and body:find('"received"', 1, true) then
        received = received + 1
        if received >= #bodies then wrk.thread:stop() end
    end
end
