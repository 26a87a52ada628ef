"""A webhook receiver that trusts nothing it has not verified with the Standard Webhooks library.

Usage: receiver.py --secret whsec_... [--port 0] [--fail-rate 0.5] [--seed 1] [--delay-ms 0]

Prints `listening <port>` on its first line once it accepts connections. Every POST is verified with
`standardwebhooks.Webhook(secret).verify(body, headers)`: a request that does not verify is answered 400 and
counted as invalid. A verified one is answered 500 with probability --fail-rate (counted as refused, not
received), else kept and answered 204 (or 200 with `reply_bytes` bytes of body, when set). GET /received answers what it kept:
{"events": [{"headers": {...}, "body": {...}, "attempt": n}, ...], "invalid": n, "refused": n, "requests": n}.
POST /control {"fail_rate": x, "delay_ms": n, "reply_bytes": n, "reset": true} changes the behaviour while it runs (`reset` forgets
what it received).
"""

import argparse
import json
import random
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook, WebhookVerificationError


class State:
    def __init__(self, secret, fail_rate, seed, delay_ms):
        self.webhook = Webhook(secret)
        self.fail_rate = fail_rate
        self.delay_ms = delay_ms
        self.reply_bytes = 0
        self.random = random.Random(seed)
        self.lock = threading.Lock()
        self.events = []
        self.invalid = 0
        self.refused = 0
        self.requests = 0
        self.attempts = {}


def handler(state):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def answer(self, status, body=b"", content_type="application/json"):
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def read_body(self):
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def do_GET(self):
            if self.path != "/received":
                return self.answer(404)
            with state.lock:
                document = {"events": list(state.events), "invalid": state.invalid, "refused": state.refused,
                            "requests": state.requests}
            self.answer(200, json.dumps(document).encode())

        def do_POST(self):
            body = self.read_body()
            if self.path == "/control":
                change = json.loads(body or b"{}")
                with state.lock:
                    state.fail_rate = float(change.get("fail_rate", state.fail_rate))
                    state.delay_ms = int(change.get("delay_ms", state.delay_ms))
                    state.reply_bytes = int(change.get("reply_bytes", state.reply_bytes))
                    if change.get("reset"):
                        state.events, state.attempts = [], {}
                        state.invalid = state.refused = state.requests = 0
                return self.answer(204)
            headers = {key.lower(): value for key, value in self.headers.items()}
            with state.lock:
                state.requests += 1
                delay_ms = state.delay_ms
            if delay_ms:
                time.sleep(delay_ms / 1000)
            try:
                payload = state.webhook.verify(body, headers)
            except (WebhookVerificationError, ValueError) as error:
                with state.lock:
                    state.invalid += 1
                print(f"invalid: {error}", file=sys.stderr, flush=True)
                return self.answer(400)
            event_id = headers["webhook-id"]
            with state.lock:
                attempt = state.attempts.get(event_id, 0) + 1
                state.attempts[event_id] = attempt
                refuse = state.random.random() < state.fail_rate
                reply_bytes = state.reply_bytes
                if refuse:
                    state.refused += 1
                else:
                    state.events.append({"headers": {k: headers[k] for k in ("webhook-id", "webhook-timestamp", "webhook-signature")},
                                         "body": payload, "attempt": attempt, "received_at": time.time()})
            if refuse:
                return self.answer(500)
            if reply_bytes:
                return self.answer(200, b"x" * reply_bytes, "text/plain")
            self.answer(204)

    return Handler


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--secret", required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--fail-rate", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--delay-ms", type=int, default=0)
    arguments = parser.parse_args()
    state = State(arguments.secret, arguments.fail_rate, arguments.seed, arguments.delay_ms)
    ThreadingHTTPServer.request_queue_size = 256  # listen backlog: a burst of new connections waits, none is dropped
    server = ThreadingHTTPServer(("127.0.0.1", arguments.port), handler(state))
    server.daemon_threads = True
    print(f"listening {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
