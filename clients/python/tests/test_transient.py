"""The worker against a stub server that fails now and then: what a real
flowd serve cannot be made to do on demand."""

import json
import socket
import threading
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from flowd import Client, TransportError, Worker

TASK = {"task_id": "t1", "lease": "l1", "lease_until": "2999-01-01T00:00:00Z", "workflow_id": "w1",
        "step": "a", "handler": "h", "attempt": 1, "input": {"n": 1}, "idempotency_key": "w1/a"}


class Stub(BaseHTTPRequestHandler):
    """Poll: 503 twice, then the task, then 204. Complete: 502 once, then 200."""

    calls: list
    lock = threading.Lock()

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.lock:
            self.calls.append((self.path, body))
            n = sum(1 for p, _ in self.calls if p == self.path)
        if self.path == "/v1/tasks/poll":
            if n <= 2:
                return self.reply(503, {"error": "Service Unavailable", "message": "database unreachable"})
            if n == 3:
                return self.reply(200, TASK)
            return self.reply(204, None)
        if self.path == "/v1/tasks/t1/complete":
            if n == 1:
                return self.reply(502, {"error": "Bad Gateway", "message": "proxy hiccup"})
            return self.reply(200, {"task_id": "t1", "status": "completed"})
        self.reply(404, {"error": "Not Found", "message": self.path})

    def reply(self, status, body):
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


class TransientErrorsTest(unittest.TestCase):
    def test_polls_and_reports_are_retried_after_5xx(self):
        calls = []
        handler = type("H", (Stub,), {"calls": calls})
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        self.addCleanup(httpd.server_close)
        self.addCleanup(httpd.shutdown)

        ran = []
        w = Worker(Client(f"http://127.0.0.1:{httpd.server_port}"), concurrency=1, wait_seconds=1)
        w.handle("h", lambda t: ran.append(t.input) or {"doubled": t.input["n"] * 2})
        w.start()
        self.addCleanup(w.stop, 0)
        for _ in range(200):
            if sum(1 for p, _ in calls if p == "/v1/tasks/t1/complete") >= 2:
                break
            threading.Event().wait(0.05)
        self.assertTrue(w.stop(5))
        self.assertEqual(ran, [{"n": 1}], "the task ran once")
        completes = [b for p, b in calls if p == "/v1/tasks/t1/complete"]
        self.assertEqual(completes, [{"lease": "l1", "output": {"doubled": 2}}] * 2)
        self.assertGreaterEqual(sum(1 for p, _ in calls if p == "/v1/tasks/poll"), 3)
        self.assertIsNone(w.error)

    def test_a_poll_aborted_as_it_starts_is_never_sent(self):
        # A worker stopped while its poll is being opened shuts the poll's
        # socket down: the poll must not reach the server, or it could lease
        # a task that nobody runs until its lease expires.
        calls = []
        handler = type("H", (Stub,), {"calls": calls})
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        self.addCleanup(httpd.server_close)
        self.addCleanup(httpd.shutdown)

        def abort(conn):
            conn.sock.shutdown(socket.SHUT_RDWR)

        client = Client(f"http://127.0.0.1:{httpd.server_port}")
        with self.assertRaises(TransportError):
            client.poll_task("w", ["h"], 1, on_connection=abort)
        threading.Event().wait(0.2)
        self.assertEqual(calls, [])


if __name__ == "__main__":
    unittest.main()
