// flowd: a worker and a client for the flowd workflow server, with no runtime
// dependency (the global fetch and AbortController of Node 20+).

export { Client, etag } from "./client.js";
export type { ClientOptions, Instance, JournalEntry, ListOptions, PollOptions, StartOptions, Task, Wait, WorkflowPage } from "./client.js";
export {
  APIError, BadRequestError, CancelledError, ConflictError, NonDeterminismError, StepFailedError, TimeoutError, FlowdError, ForbiddenError, NotFoundError, PermanentError,
  PreconditionFailedError, PreconditionRequiredError, ServerError, TooLargeError, TransportError,
  UnauthorizedError, UnavailableError, UnprocessableError, UnsupportedMediaTypeError,
} from "./errors.js";
export { Worker } from "./worker.js";
export type { Handler, Logger, WorkerOptions } from "./worker.js";
export { WorkflowContext, definitionOf } from "./workflow.js";
export type { EventOptions, RetryPolicy, StepInfo, StepOptions, WorkflowFunction, WorkflowOptions } from "./workflow.js";
