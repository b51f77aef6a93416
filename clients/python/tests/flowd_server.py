"""A real `flowd serve` for the tests, on a free port: a temporary SQLite
database, or, when FLOWD_TEST_POSTGRES_URL names a PostgreSQL server (its user
may create databases), a new database of its own there (created with psql).

FLOWD_BIN names the flowd binary (scripts/test-clients builds it once); without
it the binary is built from this repository with `go build`.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import threading
import time
import unittest
import urllib.parse

from flowd import Client, Instance

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
_SERVING = re.compile(r"flowd is serving the API at (\S+)/v1")


def flowd_binary(tmp: str) -> str:
    path = os.environ.get("FLOWD_BIN")
    if path:
        return path
    path = os.path.join(tmp, "flowd")
    subprocess.run(["go", "build", "-o", path, "./cmd/flowd"], cwd=REPO, check=True)
    return path


_databases = 0


def new_postgres_database(url: str) -> str:
    """Creates a database on the PostgreSQL server of url and returns its URL."""
    global _databases
    _databases += 1
    name = f"flowd_py_{os.getpid()}_{_databases}"
    subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-c", f"CREATE DATABASE {name}", url], check=True)
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(parts._replace(path="/" + name))


class FlowdServer:
    """flowd serve with a short sweep interval, so that expired leases are
    noticed within a tenth of a second."""

    def __init__(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="flowd-python-")
        self.binary = flowd_binary(self._tmp.name)
        postgres = os.environ.get("FLOWD_TEST_POSTGRES_URL")
        self.db = new_postgres_database(postgres) if postgres else "sqlite:" + os.path.join(self._tmp.name, "flowd.db")
        self.url = ""
        self._start("127.0.0.1:0")
        self.client = Client(self.url)

    def _start(self, addr: str) -> None:
        self.proc = subprocess.Popen(
            [self.binary, "serve", "--addr", addr, "--db", self.db,
             "--sweep-interval", "100ms", "--log-level", "warn"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        found = threading.Event()
        proc, lines = self.proc, self.lines

        def drain():
            for line in proc.stdout:
                lines.append(line)
                m = _SERVING.search(line)
                if m and not found.is_set():
                    self.url = m.group(1)
                    found.set()
            found.set()
        threading.Thread(target=drain, daemon=True).start()
        if not found.wait(30) or not self.url:
            self.close()
            raise RuntimeError("flowd serve did not start:\n" + "".join(self.lines))

    def restart(self) -> None:
        """Kills the server (SIGKILL: no graceful shutdown) and starts it again on
        the same database and port."""
        url = self.url
        self.proc.kill()
        self.proc.wait()
        self.proc.stdout.close()
        self._start(url.split("://", 1)[1])
        if self.url != url:
            raise RuntimeError(f"flowd serve came back at {self.url}, not {url}")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()
        self._tmp.cleanup()


def wait_for(client: Client, workflow_id: str, statuses=("COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT"),
             timeout: float = 30) -> Instance:
    """Reads the instance until its status is one of statuses; fails the test after timeout."""
    deadline = time.monotonic() + timeout
    while True:
        inst = client.get_workflow(workflow_id)
        if inst.status in statuses:
            return inst
        if time.monotonic() > deadline:
            raise unittest.TestCase.failureException(
                f"workflow {workflow_id} still {inst.status} after {timeout}s: {inst.state}")
        time.sleep(0.05)
