"""A worker that serves handlers to a flowd server over the HTTP tasks API."""

from __future__ import annotations

import http.client
import json
import logging
import os
import random
import re
import signal
import socket
import threading
import time
from datetime import datetime
from typing import Any, Callable, TypeVar, overload

from .client import Client, Task
from .errors import (APIError, ConflictError, FlowdError, NotFoundError, PermanentError,
                     TransportError)
from .workflow import RetryPolicy, Seconds, WorkflowFn, definition_of, run_workflow

__all__ = ["Worker", "Handler"]

_T = TypeVar("_T")

Handler = Callable[[Task], Any]
"""A handler gets the task and returns its output (any JSON-serialisable value)."""

# Failed calls to the server are retried after a wait doubling from
# _BACKOFF_MIN to _BACKOFF_MAX, drawn from its upper half so that slots and
# workers that failed together do not retry together.
_BACKOFF_MIN = 0.1
_BACKOFF_MAX = 5.0

# Answers to a poll that retrying does not change: a bad request, a missing or
# unknown token, or no flowd API at the URL.
_REFUSED = {400, 401, 403, 404, 405}


def _backoff(n: int) -> float:
    d = min(_BACKOFF_MIN * (2 ** (n - 1)), _BACKOFF_MAX)
    return float(d / 2 + random.uniform(0, d / 2))


def _timestamp(rfc3339: str) -> float | None:
    """Seconds since the epoch of an RFC 3339 time; Go writes up to 9 fractional digits."""
    m = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)", rfc3339 or "")
    if not m:
        return None
    frac = (m.group(2) or "")[:6]
    zone = "+00:00" if m.group(3) == "Z" else m.group(3)
    return datetime.fromisoformat(m.group(1) + ("." + frac.ljust(6, "0") if frac else "") + zone).timestamp()


class Worker:
    """Serves handlers, registered by name, to the server behind client.

    concurrency slots each long-poll for a task of the registered handlers,
    run its handler and report the outcome. While a handler runs its lease is
    extended by heartbeats at a third of what is left of it; a heartbeat
    answered 409 means the task was taken away (instance cancelled, lease
    expired, step completed by hand): task.cancelled is set and the result is
    dropped. A handler that raises PermanentError fails the step at once; any
    other exception fails the attempt, retried per the step's policy.
    Transport errors and 5xx are retried with backoff.

    lease_seconds is asked for each task and heartbeat (None: the server's
    --lease); wait_seconds is one long poll (at most 60); shutdown_grace is how
    long stop() lets running handlers finish and report before abandoning them
    (their leases then expire on the server and they run again elsewhere).
    """

    def __init__(self, client: Client, *, name: str | None = None, concurrency: int = 4,
                 lease_seconds: float | None = None, wait_seconds: float = 20,
                 shutdown_grace: float = 10.0, logger: logging.Logger | None = None):
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        if lease_seconds is not None and not 1 <= lease_seconds <= 3600:
            raise ValueError(f"lease_seconds must be None (the server's default) or 1-3600, got {lease_seconds}")
        if not 0 <= wait_seconds <= 60:
            raise ValueError(f"wait_seconds must be from 0 to 60, got {wait_seconds}")
        self.client = client
        self.name = name or f"{socket.gethostname() or 'worker'}-{os.getpid()}"
        self.concurrency = concurrency
        self.lease_seconds = lease_seconds
        self.wait_seconds = wait_seconds
        self.shutdown_grace = shutdown_grace
        self.log = logger or logging.getLogger("flowd.worker")
        self._handlers: dict[str, Handler] = {}
        self._workflows: dict[str, tuple[WorkflowFn, dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()    # no new polls
        self._abandoned = threading.Event()   # no more reports
        self._stop_requested = threading.Event()
        self._idle = threading.Condition(self._lock)
        self._running: dict[str, Task] = {}   # by lease
        self._polls: set[http.client.HTTPConnection] = set()              # connections of polls in flight
        self._slots: list[threading.Thread] = []
        self._answered = False
        self._started = False
        self._stopped = False
        self.error: FlowdError | None = None  # why the worker stopped by itself

    @overload
    def handle(self, name: str) -> Callable[[Handler], Handler]: ...

    @overload
    def handle(self, name: str, fn: Handler) -> Handler: ...

    def handle(self, name: str, fn: Handler | None = None) -> Handler | Callable[[Handler], Handler]:
        """Registers fn as the handler called name; without fn, a decorator."""
        if not name or name.startswith("flowd:"):
            raise ValueError(f"{name!r} is not a handler name a worker can serve")
        if self._started:
            raise RuntimeError("register handlers before the worker starts")

        def register(f: Handler) -> Handler:
            if not callable(f):
                raise TypeError(f"handler {name!r} is not callable")
            self._handlers[name] = f
            return f
        return register(fn) if fn is not None else register

    @overload
    def workflow(self, name: str, *, timeout: Seconds | None = None,
                 retry: RetryPolicy | None = None) -> Callable[[WorkflowFn], WorkflowFn]: ...

    @overload
    def workflow(self, name: str, fn: WorkflowFn, *, timeout: Seconds | None = None,
                 retry: RetryPolicy | None = None) -> WorkflowFn: ...

    def workflow(self, name: str, fn: WorkflowFn | None = None, *, timeout: Seconds | None = None,
                 retry: RetryPolicy | None = None) -> WorkflowFn | Callable[[WorkflowFn], WorkflowFn]:
        """Registers fn(ctx, input) as the code workflow called name; without fn, a
        decorator. When the worker starts it puts the code definition of name
        (code: {handler: name}, with timeout and retry, the retry of the
        function's runs); the worker then serves its runs.
        """
        if not name or name.startswith("flowd:"):
            raise ValueError(f"{name!r} is not a workflow name a worker can serve")
        if self._started:
            raise RuntimeError("register workflows before the worker starts")
        definition = definition_of(name, timeout, retry)

        def register(f: WorkflowFn) -> WorkflowFn:
            if not callable(f):
                raise TypeError(f"workflow {name!r} is not callable")
            self._workflows[name] = (f, definition)
            return f
        return register(fn) if fn is not None else register

    def start(self) -> None:
        """Puts the code definition of each workflow registered, then starts
        polling in background threads and returns."""
        if not self._handlers and not self._workflows:
            raise ValueError("register at least one handler or workflow before starting the worker")
        if self._started:
            raise RuntimeError("the worker was already started")
        for name in sorted(self._workflows):
            self.client.put_definition(name, self._workflows[name][1])
        self._started = True
        # A server that took the definitions was reached: a first poll that
        # fails is an outage from here on.
        self._answered = bool(self._workflows)
        self.log.info("worker %s started: handlers %s, concurrency %d", self.name,
                      ",".join(sorted(set(self._handlers) | set(self._workflows))), self.concurrency)
        for i in range(self.concurrency):
            t = threading.Thread(target=self._serve, name=f"flowd-worker-{i}", daemon=True)
            t.start()
            self._slots.append(t)

    def run(self, handle_signals: bool = True) -> None:
        """Starts the worker and blocks until stop() is called, SIGTERM or SIGINT
        arrives (handle_signals, main thread only) or the server refuses the
        worker; then stops gracefully. Raises the error that stopped the worker.
        """
        previous = {}
        if handle_signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                previous[sig] = signal.signal(sig, lambda *_: self._stop_requested.set())
        try:
            self.start()
            while not self._stop_requested.wait(0.5):
                pass
            self.stop()
        finally:
            for sig, h in previous.items():
                signal.signal(sig, h)
        if self.error is not None:
            raise self.error

    def stop(self, timeout: float | None = None) -> bool:
        """Stops polling and waits for the handlers running to finish and report,
        for up to timeout seconds (default shutdown_grace); then abandons the
        rest. Returns True when nothing had to be abandoned. Idempotent.
        """
        grace = self.shutdown_grace if timeout is None else timeout
        self._stopping.set()
        self._stop_requested.set()
        with self._lock:
            polls = list(self._polls)
        for conn in polls:
            _abort(conn)
        deadline = time.monotonic() + max(grace, 0)
        with self._lock:
            while self._running and time.monotonic() < deadline:
                self._idle.wait(deadline - time.monotonic())
            left = list(self._running.values())
            first = not self._stopped
            self._stopped = True
        if left:
            self.log.warning("abandoning %d tasks still running; their leases expire on the server and they run again",
                             len(left))
            self._abandoned.set()
            for t in left:
                _cancel(t, "the worker is shutting down and abandoned the task")
        elif first:
            self.log.info("worker %s stopped", self.name)
        return not left

    # One slot: poll, run, report, until the worker stops.

    def _serve(self) -> None:
        failures = 0
        names = sorted(set(self._handlers) | set(self._workflows))
        while not self._stopping.is_set():
            sent = time.monotonic()
            conns: list[http.client.HTTPConnection] = []
            try:
                task = self.client.poll_task(self.name, names, self.wait_seconds, self.lease_seconds,
                                             on_connection=lambda c: self._poll_started(c, conns))
            except FlowdError as e:
                if self._stopping.is_set():
                    return
                status = e.status if isinstance(e, APIError) else 0
                if status in _REFUSED:
                    self._fail(e, "the server refused to hand out tasks")
                    return
                if isinstance(e, TransportError) and not self._answered:
                    self._fail(e, "cannot reach the server")
                    return
                failures += 1
                d = _backoff(failures)
                if failures == 1:
                    self.log.warning("polling for tasks failed; retrying with backoff: %s", e)
                self._stopping.wait(d)
                continue
            finally:
                with self._lock:
                    self._polls.difference_update(conns)
            failures = 0
            self._answered = True
            if task is None:
                # A server that answers "no task" long before the wait is up
                # must not make this a busy loop.
                if time.monotonic() - sent < self.wait_seconds / 2:
                    self._stopping.wait(_backoff(3))
                continue
            with self._lock:
                if self._stopping.is_set():
                    # Leased as the worker stopped: its lease expires and it runs again.
                    return
                self._running[task.lease] = task
            try:
                self._execute(task)
            finally:
                with self._lock:
                    del self._running[task.lease]
                    self._idle.notify_all()

    def _poll_started(self, conn: http.client.HTTPConnection, conns: list[http.client.HTTPConnection]) -> None:
        conns.append(conn)
        with self._lock:
            self._polls.add(conn)
        if self._stopping.is_set():
            _abort(conn)

    def _fail(self, err: FlowdError, what: str) -> None:
        self.log.error("worker %s: %s: %s", self.name, what, err)
        with self._lock:
            if self.error is None:
                self.error = err
        self._stopping.set()
        self._stop_requested.set()

    def _execute(self, task: Task) -> None:
        log = self.log
        lease = _LeaseClock(_timestamp(task.lease_until) or time.time() + (self.lease_seconds or 1))
        done = threading.Event()
        hb = threading.Thread(target=self._keep_lease, args=(task, lease, done), daemon=True)
        hb.start()
        output: Any = None
        error: str | None = None
        retryable = True
        where = f"task {task.id} ({task.workflow_id}/{task.step}, attempt {task.attempt})"
        workflow = self._workflows.get(task.handler) if task.kind == "workflow" else None
        try:
            if workflow is not None:
                outcome = run_workflow(workflow[0], self.client, task, lambda call: self._report(lease, call))
                if outcome.dropped:
                    done.set()
                    hb.join()
                    log.info("%s: run ended: %s", where, outcome.dropped)
                    return
                if outcome.ok:
                    output = outcome.output
                else:
                    error, retryable = outcome.error, outcome.retryable
            else:
                output = self._call(task)
        except PermanentError as e:
            error, retryable = str(e) or type(e).__name__, False
        except Exception as e:  # every other failure of the handler fails the attempt
            error = str(e) or type(e).__name__
        done.set()
        hb.join()
        if task.cancelled.is_set():
            log.warning("%s dropped: %s", where, task.cancel_reason)
            return
        try:
            if error is None:
                try:
                    self._report(lease, lambda: self.client.complete_task(task.id, task.lease, output))
                    log.info("%s completed", where)
                    return
                except APIError as e:
                    if e.status not in (400, 413):
                        raise
                    # The server will never take this output (too large, say):
                    # another attempt would only produce it again.
                    error, retryable = f"the server refused the handler's output: {e}", False
            message = error or "failed"
            self._report(lease, lambda: self.client.fail_task(task.id, task.lease, message, retryable))
            log.info("%s failed (retryable: %s): %s", where, retryable, error)
        except (ConflictError, NotFoundError) as e:
            # Fenced off: whoever holds the step now decides.
            log.info("%s: outcome not recorded, the worker no longer holds the task: %s", where, e)
        except FlowdError as e:
            log.warning("%s: outcome not recorded, the lease expires and the task runs again: %s", where, e)

    def _call(self, task: Task) -> Any:
        fn = self._handlers.get(task.handler)
        if fn is None:
            raise PermanentError(f"no handler {task.handler!r} on worker {self.name}")
        out = fn(task)
        try:
            json.dumps(out)
        except (TypeError, ValueError) as e:
            raise PermanentError(f"handler returned a value that is not JSON: {e}") from e
        return out

    def _report(self, lease: "_LeaseClock", send: Callable[[], _T]) -> _T:
        """Sends an outcome, retrying transport errors, 408, 429 and 5xx with
        backoff while the lease lasts; any other refusal is final."""
        failures = 0
        while True:
            try:
                return send()
            except FlowdError as e:
                status = e.status if isinstance(e, APIError) else 0
                if 400 <= status < 500 and status not in (408, 429):
                    raise
                failures += 1
                d = _backoff(failures)
                if time.time() + d > lease.get() or self._abandoned.wait(d):
                    raise

    def _keep_lease(self, task: Task, lease: "_LeaseClock", done: threading.Event) -> None:
        """Heartbeats at a third of what is left of the lease until done; sets
        task.cancelled when the lease is lost (409/404) or runs out."""
        capped = False  # the step's timeout caps the lease: heartbeats cannot move it
        while True:
            left = lease.get() - time.time()
            wait = left if capped else max(left / 3, 0.05)
            # Capped at an hour, the longest lease, so that a far-off expiry
            # cannot overflow the wait.
            if done.wait(min(max(wait, 0), 3600)):
                return
            if time.time() >= lease.get():
                _cancel(task, "attempt timed out: the step's timeout caps the lease" if capped
                        else "the lease expired: heartbeats did not reach the server")
                return
            try:
                until = _timestamp(self.client.heartbeat(task.id, task.lease, self.lease_seconds))
            except (ConflictError, NotFoundError) as e:
                _cancel(task, f"lost the lease: {e}")
                return
            except FlowdError as e:
                self.log.warning("heartbeat of task %s failed: %s", task.id, e)
                continue
            if until is None or until <= lease.get():
                capped = True
            else:
                lease.set(until)


class _LeaseClock:
    """The lease's expiry (seconds since the epoch), moved by heartbeats."""

    def __init__(self, until: float):
        self._until = until
        self._lock = threading.Lock()

    def get(self) -> float:
        with self._lock:
            return self._until

    def set(self, until: float) -> None:
        with self._lock:
            self._until = until


def _cancel(task: Task, reason: str) -> None:
    if not task.cancelled.is_set():
        task.cancel_reason = reason
        task.cancelled.set()


def _abort(conn: http.client.HTTPConnection) -> None:
    """Ends a poll in flight by shutting its socket down; its thread then sees an error."""
    sock = getattr(conn, "sock", None)
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
