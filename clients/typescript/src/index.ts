// flowd: a worker and a client for the flowd workflow server, with no runtime
// dependency (the global fetch and AbortController of Node 20+).

export { Client, etag } from "./client.js";
export type { ClientOptions, Instance, PollOptions, StartOptions, Task } from "./client.js";
export {
  APIError, BadRequestError, ConflictError, FlowdError, ForbiddenError, NotFoundError, PermanentError,
  PreconditionFailedError, PreconditionRequiredError, ServerError, TooLargeError, TransportError,
  UnauthorizedError, UnavailableError, UnprocessableError, UnsupportedMediaTypeError,
} from "./errors.js";
export { Worker } from "./worker.js";
export type { Handler, Logger, WorkerOptions } from "./worker.js";
