"""A small client of the flowd HTTP API (/v1): workflows, definitions and tasks."""

from __future__ import annotations

import http.client
import json
import threading
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from .errors import (ConflictError, FlowdError, PreconditionFailedError,
                     TransportError, error_for_status)

__all__ = ["Client", "Instance", "Task", "etag"]


def etag(version: int) -> str:
    """The strong entity tag of an instance version, as If-Match wants it: '"4"'."""
    return f'"{int(version)}"'


@dataclass
class Instance:
    """A workflow instance as the API returns it.

    version is the instance version (its ETag without the quotes); send it back
    as if_match to change the instance only if nobody changed it meanwhile.
    raw is the whole JSON object, for fields this class does not name.
    """

    id: str
    status: str
    version: int
    state: dict[str, Any]
    definition: str | None = None
    input: Any = None
    output: Any = None
    # The search attributes (name -> a string, a number or a boolean).
    search: dict[str, Any] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict, repr=False)
    # True when this request created the instance (201); False for a repeat of
    # a create with the same idempotency key (200).
    created: bool = False

    @property
    def etag(self) -> str:
        return etag(self.version)

    @classmethod
    def from_json(cls, body: dict[str, Any], created: bool = False) -> "Instance":
        return cls(id=body["id"], status=body["status"], version=body["version"],
                   state=body.get("state") or {}, definition=body.get("definition"),
                   input=body.get("input"), output=body.get("output"),
                   search=body.get("search") or {}, raw=body,
                   created=created)


@dataclass
class Task:
    """One attempt of a task step, as POST /v1/tasks/poll hands it out."""

    id: str
    lease: str
    lease_until: str
    workflow_id: str
    step: str
    handler: str
    attempt: int
    input: Any
    # WORKFLOW_ID/STEP (WORKFLOW_ID/STEP/INDEX for a foreach iteration), the same
    # for every attempt: key side effects on it, delivery is at least once.
    idempotency_key: str
    # The item's index (from 0) for an iteration of a foreach step, else None.
    index: int | None = None
    # Set when the attempt's result will be dropped: the lease was lost (409 on a
    # heartbeat), ran out, or the worker abandoned the task at shutdown. A
    # long-running handler should check it and return early.
    cancelled: threading.Event = field(default_factory=threading.Event, repr=False)
    cancel_reason: str = ""
    # "step" for a step of a flowd definition, "workflow" for a run of a code
    # workflow, whose journal (the recorded entries, state.steps) comes along.
    kind: str = "step"
    journal: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> "Task":
        return cls(id=body["task_id"], lease=body["lease"], lease_until=body.get("lease_until", ""),
                   workflow_id=body["workflow_id"], step=body["step"], handler=body["handler"],
                   attempt=body["attempt"], input=body.get("input"),
                   idempotency_key=body.get("idempotency_key", ""), index=body.get("index"),
                   kind=body.get("kind") or "step", journal=body.get("journal") or {})


class _Response:
    def __init__(self, status: int, headers: http.client.HTTPMessage, body: Any):
        self.status = status
        self.headers = headers
        self.body = body


class Client:
    """Client of one flowd server.

    base_url is the server's URL (http://127.0.0.1:8080); token is the bearer
    token of a server started with --token-file. Every failed call raises a
    subclass of FlowdError: an APIError subclass by status, or TransportError.
    Each call uses its own connection, so one Client may be shared by threads.
    """

    def __init__(self, base_url: str, token: str | None = None, timeout: float = 30.0,
                 headers: dict[str, str] | None = None):
        u = urllib.parse.urlsplit(base_url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"flowd client: server URL {base_url!r} must be http:// or https:// with a host")
        if u.query or u.fragment or u.username:
            raise ValueError(f"flowd client: server URL {base_url!r} must not carry credentials, a query or a fragment")
        self._scheme = u.scheme
        self._host = u.hostname
        self._port = u.port
        self._prefix = u.path.rstrip("/")
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self._headers = dict(headers or {})
        if token:
            self._headers["Authorization"] = "Bearer " + token

    # Workflows.

    def start_workflow(self, definition: str | None = None, input: Any = None, id: str | None = None,
                       state: dict[str, Any] | None = None, idempotency_key: str | None = None,
                       search: dict[str, Any] | None = None) -> Instance:
        """Starts an instance of definition (or a free-form one without it).

        search are search attributes (name -> a string, a number or a
        boolean), over the definition's of the same name.

        idempotency_key (Idempotency-Key header) makes the call safe to repeat:
        a repeat with the same key and body returns the first call's instance
        with created False. Raises NotFoundError (unknown definition),
        ConflictError (id exists), UnprocessableError (key used for another body).
        """
        body: dict[str, Any] = {}
        if id is not None:
            body["id"] = id
        if definition is not None:
            body["definition"] = definition
        if input is not None:
            body["input"] = input
        if state is not None:
            body["state"] = state
        if search is not None:
            body["search"] = search
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        resp = self._call("POST", "/v1/workflows", body, headers=headers)
        return Instance.from_json(resp.body, created=resp.status == 201)

    def get_workflow(self, id: str) -> Instance:
        """Returns the instance with its current version. Raises NotFoundError."""
        return Instance.from_json(self._call("GET", _workflow_path(id)).body)

    def list_workflows(self, status: str | None = None, definition: str | None = None,
                       search: dict[str, Any] | None = None, parent: str | None = None,
                       id_prefix: str | None = None, created_after: str | None = None,
                       created_before: str | None = None, updated_before: str | None = None,
                       limit: int = 50, cursor: str | None = None) -> tuple[list[Instance], str | None]:
        """One page of instances, newest first, and the cursor of the next page
        (None on the last page): pass it back as cursor to read on.

        The filters are ANDed: status, definition, the search attributes
        (name -> value; several must all match), parent (a parent's children),
        id_prefix, and created_after, created_before, updated_before (RFC 3339
        times). limit is 1-1000. Raises BadRequestError for a bad filter,
        naming it. iter_workflows reads every page.
        """
        q: list[tuple[str, str]] = [("limit", str(limit))]
        for name, value in (("status", status), ("definition", definition), ("parent", parent),
                            ("id_prefix", id_prefix), ("created_after", created_after),
                            ("created_before", created_before), ("updated_before", updated_before),
                            ("cursor", cursor)):
            if value:
                q.append((name, value))
        for name, value in (search or {}).items():
            q.append(("search." + name, _search_text(value)))
        body = self._call("GET", "/v1/workflows?" + urllib.parse.urlencode(q)).body or {}
        page = [Instance.from_json(w) for w in body.get("workflows") or []]
        return page, body.get("next_cursor") or None

    def iter_workflows(self, **filters: Any) -> Iterator[Instance]:
        """Every instance list_workflows(**filters) matches, newest first,
        reading page after page."""
        cursor = filters.pop("cursor", None)
        while True:
            page, cursor = self.list_workflows(cursor=cursor, **filters)
            yield from page
            if cursor is None:
                return

    def patch_workflow(self, id: str, patch: dict[str, Any], if_match: int | str) -> Instance:
        """Applies patch (a JSON Merge Patch) to the instance's state.

        if_match is the version the caller read (an int), or "*" for any.
        Raises PreconditionFailedError when the instance has moved on, and
        ConflictError when it is terminal; both carry current_version.
        """
        return self._conditional("PATCH", _workflow_path(id), id, patch, if_match,
                                 "application/merge-patch+json")

    def complete_step(self, id: str, step: str, output: Any, if_match: int | str) -> Instance:
        """Completes a step (typically a wait step) with output.

        Raises NotFoundError (unknown workflow or step), ConflictError (step
        already completed, instance terminal) and PreconditionFailedError (stale
        if_match), the last two with current_version.
        """
        path = _workflow_path(id) + "/steps/" + _segment(step) + "/complete"
        return self._conditional("POST", path, id, {"output": output}, if_match, "application/json")

    def update_workflow(self, id: str, merge: Callable[[Instance], dict[str, Any] | None],
                        max_attempts: int = 10) -> Instance:
        """Reads the instance, asks merge for a patch and applies it at the version
        read; on a lost race (412) reads again and asks again, up to max_attempts.

        merge returning None means "no change": the instance is returned as read.
        """
        for attempt in range(1, max_attempts + 1):
            inst = self.get_workflow(id)
            patch = merge(inst)
            if patch is None:
                return inst
            try:
                return self.patch_workflow(id, patch, inst.version)
            except PreconditionFailedError:
                if attempt == max_attempts:
                    raise
        raise AssertionError("unreachable")

    def history(self, id: str, since: int = 0, limit: int = 1000) -> list[dict[str, Any]]:
        """The instance's versions after since (each {"version", "status", "state",
        "at", "cause", "actor"}), oldest first, following next_since up to limit."""
        out: list[dict[str, Any]] = []
        while len(out) < limit:
            q = urllib.parse.urlencode({"since": since, "limit": min(limit - len(out), 1000)})
            body = self._call("GET", _workflow_path(id) + "/history?" + q).body or {}
            out.extend(body.get("versions") or [])
            nxt = body.get("next_since")
            if nxt is None:
                break
            since = nxt
        return out

    # Events.

    def publish_event(self, name: str, key: str | None = None, data: Any = None) -> dict[str, Any]:
        """Publishes the event name (with key): it completes the waits for it, and is
        kept for waits that begin later. Returns {"id", ...}."""
        body: dict[str, Any] = {"name": name}
        if key is not None:
            body["key"] = key
        if data is not None:
            body["data"] = data
        return dict(self._call("POST", "/v1/events", body).body or {})

    # Definitions.

    def put_definition(self, name: str, definition: str | dict[str, Any]) -> dict[str, Any]:
        """Stores a definition (YAML text, JSON text or a dict); returns {"name", "revision"}.

        Raises BadRequestError with problems listing what is wrong with it.
        """
        if isinstance(definition, dict):
            body, ctype = json.dumps(definition).encode(), "application/json"
        else:
            body, ctype = definition.encode(), "application/yaml"
            try:
                json.loads(definition)
                ctype = "application/json"
            except ValueError:
                pass
        return dict(self._call("PUT", "/v1/definitions/" + _segment(name), raw_body=body, content_type=ctype).body or {})

    def get_definition(self, name: str) -> dict[str, Any]:
        """The definition's latest revision as the API returns it. Raises NotFoundError."""
        return dict(self._call("GET", "/v1/definitions/" + _segment(name)).body or {})

    # Tasks: the protocol a worker speaks (Worker uses these).

    def poll_task(self, worker: str, handlers: list[str], wait_seconds: float = 0,
                  lease_seconds: float | None = None,
                  on_connection: Callable[[http.client.HTTPConnection], None] | None = None) -> Task | None:
        """Long-polls for one task of handlers; None when none came within wait_seconds.

        on_connection gets the connection, connected, before the request is
        sent, so that another thread can abort the poll by shutting its socket
        down.
        """
        body: dict[str, Any] = {"worker": worker, "handlers": list(handlers), "wait_seconds": wait_seconds}
        if lease_seconds:
            body["lease_seconds"] = lease_seconds
        resp = self._call("POST", "/v1/tasks/poll", body, timeout=self.timeout + wait_seconds,
                          on_connection=on_connection)
        if resp.status == 204 or resp.body is None:
            return None
        return Task.from_json(resp.body)

    def heartbeat(self, task_id: str, lease: str, lease_seconds: float | None = None) -> str:
        """Extends the lease; returns the new lease_until (RFC 3339).

        Raises ConflictError when the lease is lost: stop working on the task.
        """
        body: dict[str, Any] = {"lease": lease}
        if lease_seconds:
            body["lease_seconds"] = lease_seconds
        return str(self._call("POST", _task_path(task_id, "heartbeat"), body).body["lease_until"])

    def complete_task(self, task_id: str, lease: str, output: Any) -> None:
        """Reports the attempt's output. Raises ConflictError when fenced off."""
        self._call("POST", _task_path(task_id, "complete"), {"lease": lease, "output": output})

    def fail_task(self, task_id: str, lease: str, error: str, retryable: bool = True) -> None:
        """Reports a failed attempt; retryable=False fails the step at once."""
        self._call("POST", _task_path(task_id, "fail"), {"lease": lease, "error": error, "retryable": retryable})

    # Runs of code workflows (Worker.workflow uses these).

    def checkpoint_step(self, task_id: str, lease: str, name: str, attempts: int,
                        output: Any = None, error: str | None = None) -> dict[str, Any]:
        """Records the step name of a run: its output, or (error not None) its
        error after attempts. Returns the entry recorded, which may be an
        earlier run's (first write wins): the run must use it. Raises
        ConflictError when the lease is lost."""
        body: dict[str, Any] = {"lease": lease, "attempts": attempts}
        if error is not None:
            body["error"] = error
        else:
            body["output"] = output
        return dict(self._call("POST", _task_path(task_id, "steps/" + _segment(name)), body).body or {})

    def suspend_task(self, task_id: str, lease: str, waits: dict[str, dict[str, Any]]) -> None:
        """Ends a run waiting for waits ({NAME: {"sleep": "10s"} | {"event": E, "key": K,
        "timeout": D} | {"child": {"definition": D, "input": I}}})."""
        self._call("POST", _task_path(task_id, "suspend"), {"lease": lease, "waits": waits})

    def set_variable(self, task_id: str, lease: str, key: str, value: Any) -> None:
        """Writes state.variables.KEY of the run's workflow."""
        self._call("POST", _task_path(task_id, "variables/" + _segment(key)), {"lease": lease, "value": value})

    def set_search(self, task_id: str, lease: str, name: str, value: Any) -> None:
        """Sets the search attribute NAME of the run's workflow (a string, a number or a boolean)."""
        self._call("POST", _task_path(task_id, "search/" + _segment(name)), {"lease": lease, "value": value})

    # Plumbing.

    def _conditional(self, method: str, path: str, id: str, body: Any, if_match: int | str,
                     content_type: str) -> Instance:
        if isinstance(if_match, bool) or not isinstance(if_match, (int, str)):
            raise TypeError("if_match must be an instance version (int) or an entity tag string such as '*'")
        tag = etag(if_match) if isinstance(if_match, int) else if_match
        try:
            resp = self._call(method, path, body, headers={"If-Match": tag}, content_type=content_type)
        except ConflictError as e:
            # The server's refusal does not carry the version; read it so the
            # caller can decide again without another round of its own.
            try:
                current = self.get_workflow(id)
                e.current, e.current_version = current, current.version
            except FlowdError:
                pass
            raise
        return Instance.from_json(resp.body)

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        if self._scheme == "https":
            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout)
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def _call(self, method: str, path: str, body: Any = None, *, headers: dict[str, str] | None = None,
              raw_body: bytes | None = None, content_type: str = "application/json",
              timeout: float | None = None,
              on_connection: Callable[[http.client.HTTPConnection], None] | None = None) -> _Response:
        hdrs = {"Accept": "application/json", **self._headers, **(headers or {})}
        data = raw_body
        if data is None and body is not None:
            data = json.dumps(body).encode()
        if data is not None:
            hdrs["Content-Type"] = content_type
        conn = self._connection(timeout or self.timeout)
        try:
            if on_connection is not None:
                # Connected first: a socket that is not there yet cannot be
                # shut down, and a poll aborted before it connected would
                # still be sent and could lease a task nobody runs.
                conn.connect()
                on_connection(conn)
            conn.request(method, self._prefix + path, body=data, headers=hdrs)
            resp = conn.getresponse()
            raw = resp.read()
        except (OSError, http.client.HTTPException) as e:
            raise TransportError(f"{method} {self.base_url}{path}: {e}") from e
        finally:
            conn.close()
        parsed: Any = None
        if raw:
            try:
                parsed = json.loads(raw)
            except ValueError:
                parsed = None
        if resp.status >= 300:
            err = parsed if isinstance(parsed, dict) else {}
            message = err.get("message") or raw[:200].decode("utf-8", "replace")
            raise error_for_status(resp.status, err.get("error", resp.reason), message,
                                   resp.getheader("X-Request-Id", ""), err.get("problems"))
        return _Response(resp.status, resp.headers, parsed)


def _search_text(value: Any) -> str:
    """A search attribute's value as a list filter writes it: a boolean as
    true or false, a number or a string as it is."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _segment(s: str) -> str:
    return urllib.parse.quote(s, safe="")


def _workflow_path(id: str) -> str:
    return "/v1/workflows/" + _segment(id)


def _task_path(task_id: str, action: str) -> str:
    return "/v1/tasks/" + _segment(task_id) + "/" + action

