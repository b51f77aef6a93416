"""flowd: a worker and a client for the flowd workflow server, standard library only.

    from flowd import Client, Worker, PermanentError

    client = Client("http://127.0.0.1:8080")
    worker = Worker(client, concurrency=4)

    @worker.handle("greet")
    def greet(task):
        return {"greeting": f"Hello, {task.input['name']}!"}

    @worker.workflow("order")
    def order(ctx, input):
        charge = ctx.step("charge", lambda: charge_card(flowd.idempotency_key(), input["amount"]))
        ctx.sleep("cool-off", 10)
        return {"charge": charge}

    worker.run()  # until SIGTERM or SIGINT
"""

from .client import Client, Instance, Task, etag
from .errors import (APIError, BadRequestError, ConflictError, FlowdError, ForbiddenError,
                     NotFoundError, PermanentError, PreconditionFailedError,
                     PreconditionRequiredError, ServerError, TooLargeError, TransportError,
                     UnauthorizedError, UnavailableError, UnprocessableError,
                     UnsupportedMediaTypeError)
from .worker import Handler, Worker
from .workflow import (Cancelled, NonDeterminism, RetryPolicy, StepFailed, Timeout,
                       WorkflowContext, WorkflowError, WorkflowFn, idempotency_key)

__all__ = [
    "APIError", "BadRequestError", "Client", "ConflictError", "FlowdError", "ForbiddenError",
    "Handler", "Instance", "NotFoundError", "PermanentError", "PreconditionFailedError",
    "PreconditionRequiredError", "ServerError", "Task", "TooLargeError", "TransportError",
    "UnauthorizedError", "UnavailableError", "UnprocessableError", "UnsupportedMediaTypeError",
    "Worker", "etag",
    "Cancelled", "NonDeterminism", "RetryPolicy", "StepFailed", "Timeout", "WorkflowContext",
    "WorkflowError", "WorkflowFn", "idempotency_key",
]
