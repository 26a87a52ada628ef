-- wrk: the same Standard Webhooks request again and again, signed once by the standardwebhooks package (run.sh),
-- for the receiver's own capacity. The signed parts come in the environment.
function init(args)
    wrk.method = "POST"
    wrk.headers["Content-Type"] = "application/json"
    wrk.headers["webhook-id"] = os.getenv("SIGNED_ID")
    wrk.headers["webhook-timestamp"] = os.getenv("SIGNED_TIMESTAMP")
    wrk.headers["webhook-signature"] = os.getenv("SIGNED_SIGNATURE")
    wrk.body = os.getenv("SIGNED_BODY")
end
