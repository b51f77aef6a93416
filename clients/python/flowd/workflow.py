"""Workflows as code: a function whose steps are recorded on the server as they finish.

A run of a code workflow replays the function from the top with the workflow's
journal (the entries recorded so far): a recorded step returns its recorded
output without running again, a sleep or an event wait that is over returns at
once, and the first call that is not recorded runs (a step) or ends the run
waiting (a sleep, an event, a child workflow). So the function must make the
same calls in the same order every time it runs: decide only on the input,
recorded results and ctx.now() / ctx.random() / ctx.uuid(), never on the clock
or anything read outside a step.
"""

from __future__ import annotations

import json
import re
import secrets
import threading
import uuid as _uuid
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Sequence, TypeVar, Union

from .client import Client, Task
from .errors import APIError, ConflictError, FlowdError, NotFoundError, PermanentError

__all__ = [
    "Cancelled", "NonDeterminism", "RetryPolicy", "StepFailed", "Timeout", "WorkflowContext",
    "WorkflowError", "WorkflowFn", "idempotency_key",
]

T = TypeVar("T")

WorkflowFn = Callable[["WorkflowContext", Any], Any]
"""A code workflow's function: (ctx, input) -> output (any JSON value)."""

StepFn = Callable[[], Any]
"""A step's function: no arguments, returns the step's output (any JSON value)."""

Seconds = Union[int, float, timedelta]

# The kinds of recorded entries.
_STEP, _SLEEP, _EVENT, _CHILD = "step", "sleep", "event", "child"

_NAME = re.compile(r"[A-Za-z0-9._:-]{1,128}")


class WorkflowError(FlowdError):
    """Base class of the errors a code workflow's calls raise."""


class StepFailed(WorkflowError):
    """A step that failed for good (its attempts exhausted, or a PermanentError),
    or a child workflow that did not complete. The code may handle it, e.g. run
    compensations; raised out of the function, it fails the workflow at once."""

    def __init__(self, step: str, message: str, attempts: int):
        self.step = step
        self.message = message
        self.attempts = attempts
        super().__init__(f"step {step!r} failed after {attempts} attempts: {message}")


class Timeout(WorkflowError):
    """An event wait whose timeout passed before a matching event came."""

    def __init__(self, step: str, message: str):
        self.step = step
        self.message = message
        super().__init__(f"step {step!r} timed out: {message}")


class Cancelled(WorkflowError):
    """The run lost its lease (the workflow was cancelled, paused past its lease,
    or another run took over): nothing more of it is recorded. Let it propagate:
    the worker drops the run."""


class NonDeterminism(WorkflowError):
    """The code asked, under a name its journal records, for another kind of
    thing than was recorded. The workflow fails for good, even if the code
    catches this."""

    def __init__(self, step: str, recorded: str, now: str):
        self.step = step
        self.recorded = recorded
        self.now = now
        super().__init__(f"non-determinism: step {step!r} was recorded as a {recorded}, "
                         f"and the code now asks for a {now} under that name")


class _Suspended(BaseException):
    """Unwinds the function when the run ended waiting. A BaseException, so that
    the code's `except Exception` does not stop it."""


@dataclass(frozen=True)
class RetryPolicy:
    """How a step's function is tried again in the worker (seconds), or, given to
    Worker.workflow, how runs of the function that fail are (the definition's
    retry). None fields take the defaults: 3 attempts, 1 s doubling up to 60 s."""

    max_attempts: int | None = None
    initial_backoff: float | None = None
    max_backoff: float | None = None

    def backoff(self, n: int) -> float:
        """The wait after the nth failed attempt."""
        initial = self.initial_backoff if self.initial_backoff and self.initial_backoff > 0 else 1.0
        most = self.max_backoff if self.max_backoff and self.max_backoff > 0 else 60.0
        return float(min(initial * 2 ** (n - 1), most))

    @property
    def attempts(self) -> int:
        return self.max_attempts if self.max_attempts and self.max_attempts > 0 else 3

    def to_definition(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.max_attempts and self.max_attempts > 0:
            out["max_attempts"] = self.max_attempts
        if self.initial_backoff and self.initial_backoff > 0:
            out["initial_backoff"] = go_duration(self.initial_backoff)
        if self.max_backoff and self.max_backoff > 0:
            out["max_backoff"] = go_duration(self.max_backoff)
        return out


def go_duration(d: Seconds) -> str:
    """A duration as the server reads it ("10s", "1500ms")."""
    seconds = d.total_seconds() if isinstance(d, timedelta) else float(d)
    if seconds < 0:
        raise ValueError(f"a duration must not be negative, got {seconds}s")
    ms = round(seconds * 1000)
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


_local = threading.local()


def idempotency_key() -> str:
    """The idempotency key of the step whose function is running in this thread:
    WORKFLOW_ID/NAME, the same in every attempt and every run. Give it to the
    service the step calls so that a step run again does the work once."""
    key = getattr(_local, "key", None)
    if key is None:
        raise RuntimeError("flowd.idempotency_key() is only known inside a step's function")
    return str(key)


def _error_message(error: Any) -> str:
    if isinstance(error, dict):
        return str(error.get("message") or json.dumps(error))
    return "" if error is None else str(error)


def _parse_time(s: str) -> datetime:
    m = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)", s)
    if not m:
        raise ValueError(f"{s!r} is not an RFC 3339 time")
    frac = (m.group(2) or "")[:6]
    zone = "+00:00" if m.group(3) == "Z" else m.group(3)
    return datetime.fromisoformat(m.group(1) + ("." + frac.ljust(6, "0") if frac else "") + zone)


Send = Callable[[Callable[[], Any]], Any]


class WorkflowContext:
    """One run of a code workflow, as its function sees it.

    Call its methods from the function's thread (ctx.parallel runs steps on
    threads of its own). Each call takes a name, numbered name#2, name#3, ...
    when used again in the run.
    """

    def __init__(self, client: Client, task: Task, send: Send | None = None):
        self._client = client
        self._task = task
        self._send: Send = send or (lambda call: call())
        self._journal: dict[str, dict[str, Any]] = dict(task.journal or {})
        self._uses: dict[str, int] = {}
        self._lock = threading.Lock()
        # Why the run is over whatever the code does next: a lost lease, a
        # suspension, non-determinism or a bad name (which fail it for good).
        self.cancelled = False
        self.suspended = False
        self.fatal: BaseException | None = None

    @property
    def workflow_id(self) -> str:
        return self._task.workflow_id

    @property
    def attempt(self) -> int:
        """The runs since the start or the last wait: 1 for the first."""
        return self._task.attempt

    @property
    def task(self) -> Task:
        return self._task

    # Names and the journal.

    def _check(self) -> None:
        if self.fatal is not None:
            raise self.fatal
        if self.cancelled or self._task.cancelled.is_set():
            self.cancelled = True
            raise Cancelled(self._task.cancel_reason or "the run no longer holds its lease")
        if self.suspended:
            raise _Suspended()

    def _key(self, name: str) -> str:
        self._check()
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            err = PermanentError(f"step name {name!r} must be 1-128 characters of [A-Za-z0-9._:-]")
            self.fatal = err
            raise err
        with self._lock:
            n = self._uses.get(name, 0) + 1
            self._uses[name] = n
        return name if n == 1 else f"{name}#{n}"

    def _recorded(self, key: str, kind: str) -> dict[str, Any] | None:
        with self._lock:
            entry = self._journal.get(key)
        if entry is None:
            return None
        was = entry.get("kind") or _STEP
        if was != kind:
            err = NonDeterminism(key, was, kind)
            self.fatal = err
            raise err
        return entry

    def _lost(self, err: FlowdError) -> Cancelled:
        self.cancelled = True
        c = Cancelled(f"the run no longer holds its lease: {err}")
        c.__cause__ = err
        return c

    # Steps.

    def step(self, name: str, fn: StepFn, retry: RetryPolicy | None = None) -> Any:
        """Runs fn as the step name unless it is recorded, and returns its output:
        fn's (as recorded), or the recorded one. fn runs at least once until
        recorded: key its side effects on flowd.idempotency_key(). A step that
        fails for good (retry's attempts exhausted, or PermanentError) raises
        StepFailed, in this run and every replay."""
        key = self._key(name)
        entry = self._recorded(key, _STEP)
        if entry is None:
            entry = self._run_step(key, fn, retry or RetryPolicy())
        return self._outcome(key, entry)

    def parallel(self, steps: Sequence[tuple[str, StepFn] | tuple[str, StepFn, RetryPolicy | None]]) -> list[Any]:
        """Runs steps, (name, fn) or (name, fn, retry), concurrently, each recorded
        on its own as it finishes; names are numbered in list order. Returns
        their outputs in list order once all are recorded, or raises StepFailed
        of the first (in list order) that failed for good."""
        keyed: list[tuple[str, StepFn, RetryPolicy]] = []
        for s in steps:
            name, fn = s[0], s[1]
            retry = s[2] if len(s) > 2 else None  # type: ignore[misc]
            keyed.append((self._key(name), fn, retry or RetryPolicy()))
        entries: list[dict[str, Any] | None] = [self._recorded(k, _STEP) for k, _, _ in keyed]
        errors: list[BaseException | None] = [None] * len(keyed)

        def run(i: int) -> None:
            k, fn, retry = keyed[i]
            try:
                entries[i] = self._run_step(k, fn, retry)
            except BaseException as e:  # noqa: BLE001 - handed to the function's thread
                errors[i] = e

        threads = [threading.Thread(target=run, args=(i,), name=f"flowd-step-{keyed[i][0]}", daemon=True)
                   for i in range(len(keyed)) if entries[i] is None]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for e in errors:
            if e is not None:
                raise e
        return [self._outcome(keyed[i][0], entries[i] or {}) for i in range(len(keyed))]

    def _outcome(self, key: str, entry: dict[str, Any]) -> Any:
        if entry.get("status") == "FAILED":
            raise StepFailed(key, _error_message(entry.get("error")), int(entry.get("attempts") or 1))
        return entry.get("output")

    def _run_step(self, key: str, fn: StepFn, retry: RetryPolicy) -> dict[str, Any]:
        """Runs fn with its attempts, then records the outcome; returns the entry recorded."""
        task = self._task
        attempt = 1
        while True:
            self._check()
            outer = getattr(_local, "key", None)
            _local.key = f"{task.workflow_id}/{key}"
            error: str | None = None
            permanent = False
            output: Any = None
            try:
                output = fn()
            except PermanentError as e:
                error, permanent = str(e) or type(e).__name__, True
            except Exception as e:  # every other failure of fn fails the attempt
                error = str(e) or type(e).__name__
            finally:
                _local.key = outer
            if error is None:
                try:
                    json.dumps(output)
                except (TypeError, ValueError) as e:
                    # The same in every attempt: the step fails for good.
                    error, permanent = f"the step's output is not JSON: {e}", True
            if error is None or permanent or attempt >= retry.attempts:
                break
            if task.cancelled.wait(retry.backoff(attempt)):
                self._check()
            attempt += 1
        self._check()
        try:
            if error is None:
                entry = self._send(lambda: self._client.checkpoint_step(task.id, task.lease, key, attempt, output=output))
            else:
                entry = self._send(lambda: self._client.checkpoint_step(task.id, task.lease, key, attempt, error=error))
        except (ConflictError, NotFoundError) as e:
            raise self._lost(e) from e
        except APIError as e:
            if e.status in (400, 413):
                err = PermanentError(f"the server refused the outcome of step {key!r}: {e}")
                self.fatal = err
                raise err from e
            raise
        with self._lock:
            self._journal[key] = entry
        return dict(entry)

    # Waits: each ends the run unless the journal says it is over.

    def sleep(self, name: str, seconds: Seconds) -> None:
        """Waits seconds (a number or a timedelta), recorded as name: the run ends
        and the workflow holds no worker until the timer fires on the server."""
        self._wait(self._key(name), _SLEEP, {"sleep": go_duration(seconds)})

    def wait_for_event(self, name: str, event: str, key: str | None = None,
                       timeout: Seconds | None = None) -> Any:
        """Waits, recorded as name, for the event published under event (with key,
        or the key "" without it) and returns its data. An event published since
        the workflow started counts, even before the wait began. Raises Timeout
        when no event came within timeout."""
        wait: dict[str, Any] = {"event": event}
        if key is not None:
            wait["key"] = key
        if timeout is not None:
            wait["timeout"] = go_duration(timeout)
        return self._wait(self._key(name), _EVENT, wait)

    def child(self, name: str, definition: str, input: Any = None) -> Any:
        """Starts, recorded as name, a child workflow of definition (of any kind)
        with input, waits for it and returns its output; one that does not
        complete raises StepFailed."""
        try:
            json.dumps(input)
        except (TypeError, ValueError) as e:
            raise PermanentError(f"the input of child {name!r} is not JSON: {e}") from e
        return self._wait(self._key(name), _CHILD, {"child": {"definition": definition, "input": input}})

    def _wait(self, key: str, kind: str, wait: dict[str, Any]) -> Any:
        entry = self._recorded(key, kind)
        if entry is not None and entry.get("status") in ("COMPLETED", "FAILED", "CANCELLED"):
            if entry.get("status") == "COMPLETED":
                return entry.get("output")
            error = entry.get("error")
            if isinstance(error, dict) and error.get("type") == "timeout":
                raise Timeout(key, _error_message(error))
            raise StepFailed(key, _error_message(error), max(int(entry.get("attempts") or 0), 1))
        self._suspend({key: wait})

    def _suspend(self, waits: dict[str, dict[str, Any]]) -> None:
        self._check()
        task = self._task
        try:
            self._send(lambda: self._client.suspend_task(task.id, task.lease, waits))
        except (ConflictError, NotFoundError) as e:
            raise self._lost(e) from e
        self.suspended = True
        raise _Suspended()

    # Variables and recorded values.

    def set(self, key: str, value: Any) -> None:
        """Writes state.variables.KEY = value (GET /v1/workflows/{id} shows it).
        Setting the value it has writes nothing, so a replay costs no version."""
        self._check()
        json.dumps(value)
        task = self._task
        try:
            self._send(lambda: self._client.set_variable(task.id, task.lease, key, value))
        except (ConflictError, NotFoundError) as e:
            raise self._lost(e) from e

    def search(self, name: str, value: str | int | float | bool) -> None:
        """Sets the workflow's search attribute NAME ([a-z][a-z0-9_]{0,62}) to a string, a
        number or a boolean: GET /v1/workflows?search.NAME=VALUE finds it from then on.
        Setting the value it has writes nothing, so a replay costs no version."""
        self._check()
        task = self._task
        try:
            self._send(lambda: self._client.set_search(task.id, task.lease, name, value))
        except (ConflictError, NotFoundError) as e:
            raise self._lost(e) from e

    def now(self) -> datetime:
        """The time (UTC), recorded as the step flowd:now: the same in every run."""
        recorded = self.step("flowd:now", lambda: datetime.now(timezone.utc).isoformat().replace("+00:00", "Z"))
        return _parse_time(str(recorded))

    def random(self) -> float:
        """A number in [0, 1), recorded as the step flowd:random."""
        return float(self.step("flowd:random", lambda: secrets.randbits(53) / (1 << 53)))

    def uuid(self) -> str:
        """A random (version 4) UUID, recorded as the step flowd:uuid."""
        return str(self.step("flowd:uuid", lambda: str(_uuid.uuid4())))


def definition_of(name: str, timeout: Seconds | None = None, retry: RetryPolicy | None = None) -> dict[str, Any]:
    """The code definition a worker that serves the workflow name puts when it starts."""
    d: dict[str, Any] = {"name": name, "code": {"handler": name}}
    if timeout is not None:
        d["timeout"] = go_duration(timeout)
    if retry is not None:
        r = retry.to_definition()
        if r:
            d["retry"] = r
    return d


@dataclass
class RunOutcome:
    """How a run ended: output (ok), error (retryable or not), or dropped
    (suspended, or the lease lost: nothing to report)."""

    ok: bool = False
    output: Any = None
    error: str = ""
    retryable: bool = True
    dropped: str = ""


def run_workflow(fn: WorkflowFn, client: Client, task: Task, send: Send) -> RunOutcome:
    """Runs one run of fn for task."""
    ctx = WorkflowContext(client, task, send)
    try:
        output = fn(ctx, task.input)
    except _Suspended:
        pass
    except BaseException as e:  # noqa: BLE001 - the run's outcome
        if isinstance(e, (KeyboardInterrupt, SystemExit)) and not ctx.suspended:
            raise
        if not (ctx.fatal or ctx.cancelled or ctx.suspended or task.cancelled.is_set()):
            # StepFailed and Timeout come back the same in every replay;
            # PermanentError asks for no retry.
            permanent = isinstance(e, (PermanentError, StepFailed, Timeout, NonDeterminism))
            return RunOutcome(error=str(e) or type(e).__name__, retryable=not permanent)
    else:
        if not (ctx.fatal or ctx.cancelled or ctx.suspended or task.cancelled.is_set()):
            try:
                json.dumps(output)
            except (TypeError, ValueError) as e:
                return RunOutcome(error=f"the workflow returned a value that is not JSON: {e}", retryable=False)
            return RunOutcome(ok=True, output=output)
    if ctx.fatal is not None:
        return RunOutcome(error=str(ctx.fatal), retryable=False)
    if ctx.suspended:
        return RunOutcome(dropped="suspended")
    return RunOutcome(dropped=task.cancel_reason or "the run no longer holds its lease")
