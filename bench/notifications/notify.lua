-- wrk: every notification body of a file (the script's first argument) POSTed once, the way Apple posts them. Once
-- the bodies run out, each connection sends a GET /healthz a second (wrk must send something) until wrk's duration
-- ends; run.sh counts the notifications in the database, not wrk's requests.
local bodies, sent = {}, 0

function init(args)
    for line in io.lines(args[1]) do bodies[#bodies + 1] = line end
    wrk.headers["Content-Type"] = "application/json"
end

function request()
    if sent >= #bodies then return wrk.format("GET", "/healthz") end
    sent = sent + 1
    return wrk.format("POST", "/v1/notifications/app-store", nil, bodies[sent])
end

function delay()
    if sent >= #bodies then return 1000 end
    return 0
end
