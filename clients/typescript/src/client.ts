// A small client of the flowd HTTP API (/v1): workflows, definitions and tasks.
// It uses the global fetch of Node 20+, and nothing else.

import {
  ConflictError, FlowdError, PreconditionFailedError, TransportError, errorForStatus,
} from "./errors.js";

/** The strong entity tag of an instance version, as If-Match wants it: "4" in quotes. */
export function etag(version: number): string {
  return `"${version}"`;
}

/** A workflow instance as the API returns it. */
export interface Instance {
  id: string;
  status: string;
  /** The instance version (its ETag without the quotes): pass it as ifMatch. */
  version: number;
  state: Record<string, any>;
  definition?: string;
  input?: unknown;
  output?: unknown;
  /** The search attributes (name → a string, a number or a boolean); {} for none. */
  search: Record<string, string | number | boolean>;
  /** True when this request created the instance (201); false for a repeat with the same idempotency key (200). */
  created: boolean;
  /** The whole JSON object, for fields this interface does not name. */
  raw: Record<string, unknown>;
}

/** One attempt of a task step, as POST /v1/tasks/poll hands it out. */
export interface Task {
  id: string;
  lease: string;
  leaseUntil: string;
  workflowId: string;
  step: string;
  handler: string;
  /** 1 for the first delivery, +1 for every delivery after a failure, an expired lease or a timeout. */
  attempt: number;
  /** The item's index (from 0) for an iteration of a foreach step, else undefined. */
  index?: number;
  input: unknown;
  /**
   * WORKFLOW_ID/STEP (WORKFLOW_ID/STEP/INDEX for a foreach iteration), the same
   * for every attempt: key side effects on it, delivery is at least once.
   */
  idempotencyKey: string;
  /** "workflow" for a run of a code workflow, "step" for a step task. */
  kind: "step" | "workflow";
  /** A run's journal: the workflow's recorded entries (state.steps), by name. */
  journal?: Record<string, JournalEntry>;
  /**
   * Aborted when the attempt's result will be dropped: the lease was lost (409
   * on a heartbeat), ran out, or the worker abandoned the task at shutdown.
   * Pass it to fetch and the like; signal.reason says why.
   */
  signal: AbortSignal;
}

/** One recorded entry of a code workflow's journal (state.steps.NAME). */
export interface JournalEntry {
  status: "COMPLETED" | "FAILED" | "WAITING" | "RUNNING" | "CANCELLED" | string;
  output?: unknown;
  /** A failed entry's error: its message, or an object with "type" and "message". */
  error?: unknown;
  attempts?: number;
  /** "step", "sleep", "event" or "child" (absent: "step"). */
  kind?: string;
  seq?: number;
  /** The order in which waits finished. */
  finished?: number;
  [field: string]: unknown;
}

/** One thing a run waits for, as POST /v1/tasks/{id}/suspend takes it. */
export type Wait =
  | { sleep: string }
  | { event: string; key?: string; timeout?: string }
  | { child: { definition: string; input: unknown } };

export interface ClientOptions {
  /** Bearer token, for a server started with --token-file. */
  token?: string;
  /** Timeout of a request in milliseconds, added to a poll's wait [30000]. */
  timeoutMs?: number;
  /** Headers sent with every request (e.g. User-Agent). */
  headers?: Record<string, string>;
}

export interface StartOptions {
  definition?: string;
  input?: unknown;
  id?: string;
  state?: Record<string, unknown>;
  /** Search attributes (name → a string, a number or a boolean), over the definition's of the same name. */
  search?: Record<string, string | number | boolean>;
  /** Idempotency-Key header: a repeat with the same key and body returns the first call's instance. */
  idempotencyKey?: string;
}

/** The filters of Client.listWorkflows, ANDed; times are RFC 3339. */
export interface ListOptions {
  status?: string;
  definition?: string;
  /** Search attributes that must all match (name → value). */
  search?: Record<string, string | number | boolean>;
  /** A parent's children. */
  parent?: string;
  idPrefix?: string;
  createdAfter?: string;
  createdBefore?: string;
  updatedBefore?: string;
  /** 1–1000 (default 50). */
  limit?: number;
  /** The nextCursor of the page before. */
  cursor?: string;
}

/** A page of Client.listWorkflows: newest first; nextCursor is undefined on the last page. */
export interface WorkflowPage {
  workflows: Instance[];
  nextCursor?: string;
}

export interface PollOptions {
  worker: string;
  handlers: string[];
  waitSeconds?: number;
  leaseSeconds?: number;
  /** Aborts the poll (a worker stopping). */
  signal?: AbortSignal;
}

interface Response_ {
  status: number;
  body: any;
}

/**
 * Client of one flowd server. Every failed call throws a FlowdError: an
 * APIError subclass by status, or TransportError.
 */
export class Client {
  readonly baseUrl: string;
  private readonly headers: Record<string, string>;
  private readonly timeoutMs: number;

  constructor(baseUrl: string, options: ClientOptions = {}) {
    let u: URL;
    try {
      u = new URL(baseUrl);
    } catch (e) {
      throw new TypeError(`flowd client: server URL ${JSON.stringify(baseUrl)} is not a URL`, { cause: e });
    }
    if ((u.protocol !== "http:" && u.protocol !== "https:") || !u.hostname) {
      throw new TypeError(`flowd client: server URL ${JSON.stringify(baseUrl)} must be http:// or https:// with a host`);
    }
    if (u.search || u.hash || u.username || u.password) {
      throw new TypeError(`flowd client: server URL ${JSON.stringify(baseUrl)} must not carry credentials, a query or a fragment`);
    }
    this.baseUrl = u.origin + u.pathname.replace(/\/+$/, "");
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.headers = { ...(options.headers ?? {}) };
    if (options.token) this.headers["Authorization"] = `Bearer ${options.token}`;
  }

  // Workflows.

  /**
   * Starts an instance of options.definition (a free-form one without it).
   * Throws NotFoundError (unknown definition), ConflictError (id exists),
   * UnprocessableError (idempotency key used for another body).
   */
  async startWorkflow(options: StartOptions = {}): Promise<Instance> {
    const body: Record<string, unknown> = {};
    for (const k of ["id", "definition", "input", "state", "search"] as const) {
      if (options[k] !== undefined) body[k] = options[k];
    }
    const headers: Record<string, string> = {};
    if (options.idempotencyKey) headers["Idempotency-Key"] = options.idempotencyKey;
    const resp = await this.call("POST", "/v1/workflows", { body, headers });
    return toInstance(resp.body, resp.status === 201);
  }

  /** Returns the instance with its current version. Throws NotFoundError. */
  async getWorkflow(id: string): Promise<Instance> {
    return toInstance((await this.call("GET", workflowPath(id))).body);
  }

  /**
   * One page of the instances options match, newest first. Pass its
   * nextCursor back as cursor to read the next page; iterWorkflows reads
   * them all. Throws BadRequestError for a bad filter, naming it.
   */
  async listWorkflows(options: ListOptions = {}): Promise<WorkflowPage> {
    const q = new URLSearchParams({ limit: String(options.limit ?? 50) });
    const filters: [string, string | undefined][] = [
      ["status", options.status], ["definition", options.definition], ["parent", options.parent],
      ["id_prefix", options.idPrefix], ["created_after", options.createdAfter],
      ["created_before", options.createdBefore], ["updated_before", options.updatedBefore], ["cursor", options.cursor],
    ];
    for (const [name, value] of filters) {
      if (value) q.append(name, value);
    }
    for (const [name, value] of Object.entries(options.search ?? {})) q.append(`search.${name}`, String(value));
    const body = (await this.call("GET", `/v1/workflows?${q}`)).body ?? {};
    return { workflows: (body.workflows ?? []).map((w: any) => toInstance(w)), nextCursor: body.next_cursor || undefined };
  }

  /** Every instance listWorkflows(options) matches, newest first, page after page. */
  async *iterWorkflows(options: ListOptions = {}): AsyncGenerator<Instance> {
    let cursor = options.cursor;
    do {
      const page = await this.listWorkflows({ ...options, cursor });
      yield* page.workflows;
      cursor = page.nextCursor;
    } while (cursor !== undefined);
  }

  /**
   * Applies patch (a JSON Merge Patch) to the instance's state, only if the
   * instance is still at version ifMatch (or any, with "*"). Throws
   * PreconditionFailedError when it moved on and ConflictError when it is
   * terminal, both with currentVersion.
   */
  patchWorkflow(id: string, patch: Record<string, unknown>, ifMatch: number | string): Promise<Instance> {
    return this.conditional("PATCH", workflowPath(id), id, patch, ifMatch, "application/merge-patch+json");
  }

  /**
   * Completes a step (typically a wait step) with output. Throws NotFoundError
   * (unknown workflow or step), ConflictError (step already completed, instance
   * terminal) and PreconditionFailedError (stale ifMatch).
   */
  completeStep(id: string, step: string, output: unknown, ifMatch: number | string): Promise<Instance> {
    const path = `${workflowPath(id)}/steps/${encodeURIComponent(step)}/complete`;
    return this.conditional("POST", path, id, { output: output ?? null }, ifMatch, "application/json");
  }

  /**
   * Reads the instance, asks merge for a patch and applies it at the version
   * read; on a lost race (412) reads and asks again, up to maxAttempts times.
   * merge (which may be async) returning undefined means "no change".
   */
  async updateWorkflow(id: string,
    merge: (inst: Instance) => Record<string, unknown> | undefined | Promise<Record<string, unknown> | undefined>,
    maxAttempts = 10): Promise<Instance> {
    for (let attempt = 1; ; attempt++) {
      const inst = await this.getWorkflow(id);
      const patch = await merge(inst);
      if (patch === undefined) return inst;
      try {
        return await this.patchWorkflow(id, patch, inst.version);
      } catch (e) {
        if (!(e instanceof PreconditionFailedError) || attempt >= maxAttempts) throw e;
      }
    }
  }

  // Definitions.

  /**
   * Stores a definition (YAML or JSON text, or an object); returns its name and
   * revision. Throws BadRequestError whose problems list what is wrong with it.
   */
  async putDefinition(name: string, definition: string | object): Promise<{ name: string; revision: number }> {
    let raw: string;
    let contentType = "application/json";
    if (typeof definition === "string") {
      raw = definition;
      try {
        JSON.parse(definition);
      } catch {
        contentType = "application/yaml";
      }
    } else {
      raw = JSON.stringify(definition);
    }
    return (await this.call("PUT", `/v1/definitions/${encodeURIComponent(name)}`, { raw, contentType })).body;
  }

  // Tasks: the protocol a worker speaks (Worker uses these).

  /** Long-polls for one task of options.handlers; null when none came within waitSeconds. */
  async pollTask(options: PollOptions): Promise<Omit<Task, "signal"> | null> {
    const body: Record<string, unknown> = {
      worker: options.worker, handlers: options.handlers, wait_seconds: options.waitSeconds ?? 0,
    };
    if (options.leaseSeconds) body.lease_seconds = options.leaseSeconds;
    const resp = await this.call("POST", "/v1/tasks/poll", {
      body, signal: options.signal, timeoutMs: this.timeoutMs + (options.waitSeconds ?? 0) * 1000,
    });
    if (resp.status === 204 || resp.body == null) return null;
    const t = resp.body;
    return {
      id: t.task_id, lease: t.lease, leaseUntil: t.lease_until ?? "", workflowId: t.workflow_id, step: t.step,
      handler: t.handler, attempt: t.attempt, index: t.index ?? undefined, input: t.input ?? null,
      idempotencyKey: t.idempotency_key ?? "", kind: t.kind === "workflow" ? "workflow" : "step",
      journal: t.journal ?? undefined,
    };
  }

  /**
   * Records a step of a code workflow's run: its output, or (error set) that it
   * failed for good after attempts. Returns the recorded entry, which the run
   * must use (an earlier run may have recorded it). ConflictError: the lease is lost.
   */
  async checkpointStep(taskId: string, lease: string, name: string,
    outcome: { output: unknown; attempts: number } | { error: string; attempts: number }): Promise<JournalEntry> {
    const body: Record<string, unknown> = { lease, attempts: outcome.attempts };
    if ("error" in outcome) body.error = outcome.error;
    else body.output = outcome.output ?? null;
    return (await this.call("POST", `${taskPath(taskId, "steps")}/${encodeURIComponent(name)}`, { body })).body;
  }

  /** Ends a run waiting for waits (by name). ConflictError: the lease is lost. */
  async suspendTask(taskId: string, lease: string, waits: Record<string, Wait>): Promise<void> {
    await this.call("POST", taskPath(taskId, "suspend"), { body: { lease, waits } });
  }

  /** Writes state.variables.KEY of the run's workflow. ConflictError: the lease is lost. */
  async setVariable(taskId: string, lease: string, key: string, value: unknown): Promise<void> {
    await this.call("POST", `${taskPath(taskId, "variables")}/${encodeURIComponent(key)}`,
      { body: { lease, value: value ?? null } });
  }

  /** Sets the search attribute NAME of the run's workflow. ConflictError: the lease is lost. */
  async setSearch(taskId: string, lease: string, name: string, value: string | number | boolean): Promise<void> {
    await this.call("POST", `${taskPath(taskId, "search")}/${encodeURIComponent(name)}`, { body: { lease, value } });
  }

  /** The instance's history (GET /v1/workflows/{id}/history): its versions, oldest first (one page). */
  async getHistory(id: string, since = 0): Promise<Record<string, any>[]> {
    return (await this.call("GET", `${workflowPath(id)}/history?since=${since}`)).body?.versions ?? [];
  }

  /** Extends the lease; returns the new lease_until (RFC 3339). ConflictError: the lease is lost. */
  async heartbeat(taskId: string, lease: string, leaseSeconds?: number): Promise<string> {
    const body: Record<string, unknown> = { lease };
    if (leaseSeconds) body.lease_seconds = leaseSeconds;
    return (await this.call("POST", taskPath(taskId, "heartbeat"), { body })).body.lease_until;
  }

  /** Reports the attempt's output. ConflictError: the worker was fenced off. */
  async completeTask(taskId: string, lease: string, output: unknown): Promise<void> {
    await this.call("POST", taskPath(taskId, "complete"), { body: { lease, output: output ?? null } });
  }

  /** Reports a failed attempt; retryable false fails the step at once. */
  async failTask(taskId: string, lease: string, error: string, retryable = true): Promise<void> {
    await this.call("POST", taskPath(taskId, "fail"), { body: { lease, error, retryable } });
  }

  // Plumbing.

  private async conditional(method: string, path: string, id: string, body: unknown, ifMatch: number | string,
    contentType: string): Promise<Instance> {
    if (typeof ifMatch !== "number" && typeof ifMatch !== "string") {
      throw new TypeError("ifMatch must be an instance version (number) or an entity tag such as \"*\"");
    }
    const tag = typeof ifMatch === "number" ? etag(ifMatch) : ifMatch;
    try {
      return toInstance((await this.call(method, path, { body, headers: { "If-Match": tag }, contentType })).body);
    } catch (e) {
      if (e instanceof ConflictError) {
        // The server's refusal does not carry the version; read it so the
        // caller can decide again without another round of its own.
        try {
          e.current = await this.getWorkflow(id);
          e.currentVersion = e.current.version;
        } catch (readErr) {
          if (!(readErr instanceof FlowdError)) throw readErr;
        }
      }
      throw e;
    }
  }

  private async call(method: string, path: string, options: {
    body?: unknown; raw?: string; headers?: Record<string, string>; contentType?: string;
    signal?: AbortSignal; timeoutMs?: number;
  } = {}): Promise<Response_> {
    const headers: Record<string, string> = { Accept: "application/json", ...this.headers, ...(options.headers ?? {}) };
    let data = options.raw;
    if (data === undefined && options.body !== undefined) data = JSON.stringify(options.body);
    if (data !== undefined) headers["Content-Type"] = options.contentType ?? "application/json";

    const timeout = options.timeoutMs ?? this.timeoutMs;
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(new TransportError(`${method} ${path}: no answer within ${timeout} ms`)), timeout);
    const onAbort = () => ctl.abort(options.signal?.reason);
    if (options.signal?.aborted) onAbort();
    options.signal?.addEventListener("abort", onAbort);
    let status: number;
    let text: string;
    let resp: Response;
    try {
      resp = await fetch(this.baseUrl + path, { method, headers, body: data, signal: ctl.signal, redirect: "manual" });
      status = resp.status;
      text = await resp.text();
    } catch (e) {
      if (options.signal?.aborted) throw options.signal.reason ?? e;
      throw new TransportError(`${method} ${this.baseUrl}${path}: ${errorText(ctl.signal.reason ?? e)}`, { cause: e });
    } finally {
      clearTimeout(timer);
      options.signal?.removeEventListener("abort", onAbort);
    }
    let parsed: any = null;
    if (text) {
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = null;
      }
    }
    if (status >= 300) {
      const err = parsed && typeof parsed === "object" ? parsed : {};
      throw errorForStatus(status, err.error ?? resp.statusText, err.message ?? text.slice(0, 200),
        resp.headers.get("X-Request-Id") ?? "", err.problems ?? []);
    }
    return { status, body: parsed };
  }
}

function toInstance(body: any, created = false): Instance {
  return {
    id: body.id, status: body.status, version: body.version, state: body.state ?? {},
    definition: body.definition, input: body.input, output: body.output, search: body.search ?? {}, created, raw: body,
  };
}

function workflowPath(id: string): string {
  return `/v1/workflows/${encodeURIComponent(id)}`;
}

function taskPath(taskId: string, action: string): string {
  return `/v1/tasks/${encodeURIComponent(taskId)}/${action}`;
}

function errorText(e: unknown): string {
  if (e instanceof Error) {
    const cause = (e as { cause?: unknown }).cause;
    return cause instanceof Error ? `${e.message}: ${cause.message}` : e.message;
  }
  return String(e);
}
