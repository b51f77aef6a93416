"""flowd: a worker and a client for the flowd workflow server, standard library only.

    from flowd import Client, Worker, PermanentError

    client = Client("http://127.0.0.1:8080")
    worker = Worker(client, concurrency=4)

    @worker.handle("greet")
    def greet(task):
        return {"greeting": f"Hello, {task.input['name']}!"}

    worker.run()  # until SIGTERM or SIGINT
"""

from .client import Client, Instance, Task, etag
from .errors import (APIError, BadRequestError, ConflictError, FlowdError, ForbiddenError,
                     NotFoundError, PermanentError, PreconditionFailedError,
                     PreconditionRequiredError, ServerError, TooLargeError, TransportError,
                     UnauthorizedError, UnavailableError, UnprocessableError,
                     UnsupportedMediaTypeError)
from .worker import Handler, Worker

__all__ = [
    "APIError", "BadRequestError", "Client", "ConflictError", "FlowdError", "ForbiddenError",
    "Handler", "Instance", "NotFoundError", "PermanentError", "PreconditionFailedError",
    "PreconditionRequiredError", "ServerError", "Task", "TooLargeError", "TransportError",
    "UnauthorizedError", "UnavailableError", "UnprocessableError", "UnsupportedMediaTypeError",
    "Worker", "etag",
]
