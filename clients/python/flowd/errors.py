"""Errors of the flowd client: one class per HTTP status of the API."""

from __future__ import annotations

from typing import Any


class FlowdError(Exception):
    """Base class of every error this package raises."""


class TransportError(FlowdError):
    """The server could not be reached or its answer was cut off: no status."""


class APIError(FlowdError):
    """A non-2xx answer of the API, whose body is {"error": reason, "message": detail}.

    Subclasses name the statuses a caller acts on; catch APIError for any.
    """

    status: int = 0

    def __init__(self, status: int, reason: str = "", message: str = "",
                 request_id: str = "", problems: list[str] | None = None):
        self.status = status
        self.reason = reason
        self.message = message
        self.request_id = request_id
        # Every problem of a definition refused by PUT /v1/definitions/NAME.
        self.problems = problems or []
        text = f"{status} {reason}".strip()
        if message:
            text += ": " + message
        super().__init__(text)


class BadRequestError(APIError):
    """400: a malformed request or an invalid definition (see problems)."""


class UnauthorizedError(APIError):
    """401: no bearer token, or one the server does not know."""


class ForbiddenError(APIError):
    """403: e.g. a state-changing request from another site's page."""


class NotFoundError(APIError):
    """404: unknown workflow, step, definition or task."""


class ConflictError(APIError):
    """409: the instance is terminal, the step is already completed, the id exists,
    or (tasks routes) the lease is stale: the worker was fenced off.

    On a conditional write (patch, complete_step) current_version and current
    hold the instance as re-read after the refusal (None if it could not be read),
    so that the caller can decide again.
    """

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.current: Any = None  # a flowd.Instance
        self.current_version: int | None = None


class PreconditionFailedError(ConflictError):
    """412: If-Match did not match the instance's current version.

    A ConflictError, so that one except clause handles both ways a conditional
    write can lose; current_version is the version to decide again from.
    """


class TooLargeError(APIError):
    """413: a request body or resulting state over the server's limit."""


class UnsupportedMediaTypeError(APIError):
    """415: a body with a Content-Type the route does not take."""


class UnprocessableError(APIError):
    """422: a transition the table does not allow, or an idempotency key reused
    with another request."""


class PreconditionRequiredError(APIError):
    """428: the route requires If-Match."""


class ServerError(APIError):
    """5xx: the server or its database failed; worth trying again later."""


class UnavailableError(ServerError):
    """503: the database is unreachable or the server is overloaded."""


_BY_STATUS: dict[int, type[APIError]] = {
    400: BadRequestError, 401: UnauthorizedError, 403: ForbiddenError,
    404: NotFoundError, 409: ConflictError, 412: PreconditionFailedError,
    413: TooLargeError, 415: UnsupportedMediaTypeError, 422: UnprocessableError,
    428: PreconditionRequiredError, 503: UnavailableError,
}


def error_for_status(status: int, reason: str = "", message: str = "",
                     request_id: str = "", problems: list[str] | None = None) -> APIError:
    """The APIError subclass of status, ServerError for other 5xx, APIError otherwise."""
    cls: type[APIError] | None = _BY_STATUS.get(status)
    if cls is None:
        cls = ServerError if 500 <= status <= 599 else APIError
    return cls(status, reason, message, request_id, problems)


class PermanentError(Exception):
    """Raised by a handler to fail the step at once, without retry.

    Any other exception fails only the attempt, which is retried per the step's
    retry policy.
    """
