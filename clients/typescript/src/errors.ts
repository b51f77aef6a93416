// Errors of the flowd client: one class per HTTP status of the API, so that
// callers branch with instanceof instead of comparing numbers.

/** Base class of every error this package throws. */
export class FlowdError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** The server could not be reached or its answer was cut off: no status. */
export class TransportError extends FlowdError {}

/** A non-2xx answer of the API, whose body is {"error": reason, "message": detail}. */
export class APIError extends FlowdError {
  readonly status: number;
  /** The body's "error" field: the HTTP reason phrase. */
  readonly reason: string;
  /** The body's "message" field: what went wrong. */
  readonly detail: string;
  /** The X-Request-Id response header, to find the request in the server's log. */
  readonly requestId: string;
  /** Every problem of a definition refused by PUT /v1/definitions/NAME. */
  readonly problems: string[];

  constructor(status: number, reason = "", detail = "", requestId = "", problems: string[] = []) {
    super(`${status} ${reason}`.trim() + (detail ? `: ${detail}` : ""));
    this.status = status;
    this.reason = reason;
    this.detail = detail;
    this.requestId = requestId;
    this.problems = problems;
  }
}

/** 400: a malformed request or an invalid definition (see problems). */
export class BadRequestError extends APIError {}
/** 401: no bearer token, or one the server does not know. */
export class UnauthorizedError extends APIError {}
/** 403: e.g. a state-changing request from another site's page. */
export class ForbiddenError extends APIError {}
/** 404: unknown workflow, step, definition or task. */
export class NotFoundError extends APIError {}

/**
 * 409: the instance is terminal, the step is already completed, the id exists,
 * or (tasks routes) the lease is stale: the worker was fenced off.
 *
 * On a conditional write (patchWorkflow, completeStep) currentVersion and
 * current hold the instance as re-read after the refusal (undefined if it could
 * not be read), so that the caller can decide again.
 */
export class ConflictError extends APIError {
  currentVersion?: number;
  current?: import("./client.js").Instance;
}

/**
 * 412: If-Match did not match the instance's current version. A ConflictError,
 * so that one catch handles both ways a conditional write can lose.
 */
export class PreconditionFailedError extends ConflictError {}
/** 413: a request body or resulting state over the server's limit. */
export class TooLargeError extends APIError {}
/** 415: a body with a Content-Type the route does not take. */
export class UnsupportedMediaTypeError extends APIError {}
/** 422: a transition the table does not allow, or an idempotency key reused with another request. */
export class UnprocessableError extends APIError {}
/** 428: the route requires If-Match. */
export class PreconditionRequiredError extends APIError {}
/** 5xx: the server or its database failed; worth trying again later. */
export class ServerError extends APIError {}
/** 503: the database is unreachable or the server is overloaded. */
export class UnavailableError extends ServerError {}

const byStatus: Record<number, typeof APIError> = {
  400: BadRequestError, 401: UnauthorizedError, 403: ForbiddenError, 404: NotFoundError,
  409: ConflictError, 412: PreconditionFailedError, 413: TooLargeError,
  415: UnsupportedMediaTypeError, 422: UnprocessableError, 428: PreconditionRequiredError,
  503: UnavailableError,
};

/** The APIError subclass of status: ServerError for other 5xx, APIError otherwise. */
export function errorForStatus(status: number, reason: string, detail: string, requestId: string,
  problems: string[] = []): APIError {
  const cls = byStatus[status] ?? (status >= 500 && status <= 599 ? ServerError : APIError);
  return new cls(status, reason, detail, requestId, problems);
}

/**
 * Thrown by a handler to fail the step at once, without retry. Any other error
 * fails only the attempt, which is retried per the step's retry policy.
 */
export class PermanentError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "PermanentError";
  }
}

// Errors of code workflows (workflow.ts).

/**
 * A step that failed for good (after its attempts), or a child workflow that
 * did not complete. The workflow code may catch it and compensate; a run that
 * throws it fails the workflow at once (a replay would fail the same way).
 */
export class StepFailedError extends FlowdError {
  readonly step: string;
  readonly attempts: number;
  /** The step's last error message, as recorded. */
  readonly detail: string;
  constructor(step: string, detail: string, attempts: number) {
    super(`step ${JSON.stringify(step)} failed after ${attempts} attempts: ${detail}`);
    this.step = step;
    this.detail = detail;
    this.attempts = attempts;
  }
}

/** An event wait whose timeout passed before a matching event came. */
export class TimeoutError extends FlowdError {
  readonly step: string;
  constructor(step: string, detail: string) {
    super(`step ${JSON.stringify(step)} timed out: ${detail}`);
    this.step = step;
  }
}

/**
 * The run lost its lease (the workflow was cancelled or paused, or another run
 * took over): nothing more of it is recorded, and the function should stop.
 */
export class CancelledError extends FlowdError {}

/**
 * The code asked, under a name its journal records, for another kind of thing
 * than was recorded (a sleep where a step was): the workflow fails for good.
 */
export class NonDeterminismError extends FlowdError {
  readonly step: string;
  readonly recorded: string;
  readonly asked: string;
  constructor(step: string, recorded: string, asked: string) {
    super(`non-determinism: step ${JSON.stringify(step)} was recorded as a ${recorded}, and the code now asks for a ${asked} under that name`);
    this.step = step;
    this.recorded = recorded;
    this.asked = asked;
  }
}
