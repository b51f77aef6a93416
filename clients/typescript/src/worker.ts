// A worker that serves handlers to a flowd server over the HTTP tasks API.

import { Client, type Task } from "./client.js";
import { APIError, ConflictError, FlowdError, NotFoundError, PermanentError, TransportError } from "./errors.js";
import { definitionOf, runWorkflow, type WorkflowFunction, type WorkflowOptions } from "./workflow.js";

/** Thrown by call() for a run that ended with nothing to report (it waits, or lost its lease). */
class RunEnded {
  constructor(readonly why: string) {}
}

/** A handler gets the task and returns (or resolves to) its output: any JSON value. */
export type Handler = (task: Task) => unknown | Promise<unknown>;

/** Where the worker writes one line per task and per incident; console fits. */
export interface Logger {
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
}

export interface WorkerOptions {
  /** Identifies this worker in lease owners [HOSTNAME-PID]. */
  name?: string;
  /** Tasks run at once, each slot polling on its own [4]. */
  concurrency?: number;
  /** Lease asked for each task and heartbeat, 1–3600 [the server's --lease]. */
  leaseSeconds?: number;
  /** How long one long poll waits for a task, 0–60 [20]. */
  waitSeconds?: number;
  /** How long stop() lets running handlers finish and report before abandoning them [10000]. */
  shutdownGraceMs?: number;
  /** [warnings and errors on the console] */
  logger?: Logger;
}

// Failed calls to the server are retried after a wait doubling from
// BACKOFF_MIN_MS to BACKOFF_MAX_MS, drawn from its upper half so that slots and
// workers that failed together do not retry together.
const BACKOFF_MIN_MS = 100;
const BACKOFF_MAX_MS = 5000;

// Answers to a poll that retrying does not change: a bad request, a missing or
// unknown token, or no flowd API at the URL.
const REFUSED = new Set([400, 401, 403, 404, 405]);

function backoff(n: number): number {
  const d = Math.min(BACKOFF_MIN_MS * 2 ** (n - 1), BACKOFF_MAX_MS);
  return d / 2 + Math.random() * (d / 2);
}

/** Waits ms, or less when signal aborts. */
function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    // Capped at an hour, the longest lease: setTimeout fires at once for a
    // delay past 2^31-1 ms.
    const timer = setTimeout(done, Math.min(Math.max(ms, 0), 3_600_000));
    signal?.addEventListener("abort", done);
  });
}

interface NodeProcess {
  pid: number;
  env: Record<string, string | undefined>;
  once(event: string, listener: () => void): unknown;
  off(event: string, listener: () => void): unknown;
}

// The Node process object, typed here so that the package needs no @types/node.
const nodeProcess = (globalThis as { process?: NodeProcess }).process;

const consoleLogger: Logger = {
  info: () => {},
  warn: (m) => console.warn(m),
  error: (m) => console.error(m),
};

/**
 * Serves handlers, registered by name, to the server behind a Client.
 *
 * concurrency slots each long-poll for a task of the registered handlers, run
 * its handler and report the outcome. While a handler runs its lease is
 * extended by heartbeats at a third of what is left of it; a heartbeat answered
 * 409 means the task was taken away (instance cancelled, lease expired, step
 * completed by hand): task.signal aborts and the result is dropped. A handler
 * that throws PermanentError fails the step at once; any other error fails the
 * attempt, retried per the step's policy. Transport errors and 5xx are retried
 * with backoff.
 */
export class Worker {
  readonly name: string;
  /** Why the worker stopped by itself (the server refused it), if it did. */
  error?: FlowdError;

  private readonly client: Client;
  private readonly concurrency: number;
  private readonly leaseSeconds?: number;
  private readonly waitSeconds: number;
  private readonly shutdownGraceMs: number;
  private readonly log: Logger;
  private readonly handlers = new Map<string, Handler>();
  private readonly workflows = new Map<string, { fn: WorkflowFunction; options: WorkflowOptions }>();
  private ready: Promise<boolean> = Promise.resolve(true);
  private readonly polling = new AbortController();
  private readonly abandon = new AbortController();
  private readonly running = new Map<string, { ctl: AbortController; done: Promise<void> }>();
  private started = false;
  private stopped?: Promise<boolean>;
  private answered = false;
  private stopRequested!: () => void;
  private readonly stopRequest = new Promise<void>((resolve) => (this.stopRequested = resolve));

  constructor(client: Client, options: WorkerOptions = {}) {
    const { concurrency = 4, leaseSeconds, waitSeconds = 20, shutdownGraceMs = 10_000 } = options;
    if (!Number.isInteger(concurrency) || concurrency < 1) {
      throw new RangeError(`concurrency must be an integer of at least 1, got ${concurrency}`);
    }
    if (leaseSeconds !== undefined && !(leaseSeconds >= 1 && leaseSeconds <= 3600)) {
      throw new RangeError(`leaseSeconds must be undefined (the server's default) or 1-3600, got ${leaseSeconds}`);
    }
    if (!(waitSeconds >= 0 && waitSeconds <= 60)) {
      throw new RangeError(`waitSeconds must be from 0 to 60, got ${waitSeconds}`);
    }
    this.client = client;
    this.name = options.name ?? `${nodeProcess?.env.HOSTNAME || "worker"}-${nodeProcess?.pid ?? 0}`;
    this.concurrency = concurrency;
    this.leaseSeconds = leaseSeconds;
    this.waitSeconds = waitSeconds;
    this.shutdownGraceMs = shutdownGraceMs;
    this.log = options.logger ?? consoleLogger;
  }

  /** Registers fn as the handler called name. */
  handle(name: string, fn: Handler): this {
    if (!name || name.startsWith("flowd:")) {
      throw new RangeError(`${JSON.stringify(name)} is not a handler name a worker can serve`);
    }
    if (typeof fn !== "function") throw new TypeError(`handler ${JSON.stringify(name)} is not a function`);
    if (this.started) throw new Error("register handlers before the worker starts");
    if (this.workflows.has(name)) throw new Error(`${JSON.stringify(name)} is registered as a workflow already`);
    this.handlers.set(name, fn);
    return this;
  }

  /**
   * Registers fn as the code workflow name: when the worker starts it puts the
   * code definition {name, code: {handler: name}} (with options' timeout and
   * retry of runs), then serves the workflow's runs. See WorkflowContext.
   */
  workflow<I = any, O = unknown>(name: string, fn: WorkflowFunction<I, O>, options: WorkflowOptions = {}): this {
    if (!name || name.startsWith("flowd:")) {
      throw new RangeError(`${JSON.stringify(name)} is not a workflow name a worker can serve`);
    }
    if (typeof fn !== "function") throw new TypeError(`workflow ${JSON.stringify(name)} is not a function`);
    if (this.started) throw new Error("register workflows before the worker starts");
    if (this.handlers.has(name)) throw new Error(`${JSON.stringify(name)} is registered as a handler already`);
    definitionOf(name, options); // throws on a bad timeout
    this.workflows.set(name, { fn: fn as WorkflowFunction, options });
    return this;
  }

  /** Starts polling and returns; the slots run in the background. */
  start(): void {
    if (this.handlers.size + this.workflows.size === 0) {
      throw new Error("register at least one handler or workflow before starting the worker");
    }
    if (this.started) throw new Error("the worker was already started");
    this.started = true;
    this.ready = this.putDefinitions();
    this.log.info(`worker ${this.name} started: handlers ${this.names().join(",")}, concurrency ${this.concurrency}`);
    for (let i = 0; i < this.concurrency; i++) void this.serve();
  }

  /**
   * Starts the worker and resolves once stop() was called, SIGTERM or SIGINT
   * arrived (handleSignals) or the server refused the worker, and the tasks in
   * flight have finished (within shutdownGraceMs). Rejects with the error that
   * stopped the worker.
   */
  async run(options: { handleSignals?: boolean } = {}): Promise<void> {
    const onSignal = () => this.stopRequested();
    const signals = options.handleSignals !== false && nodeProcess ? ["SIGTERM", "SIGINT"] : [];
    for (const s of signals) nodeProcess!.once(s, onSignal);
    try {
      this.start();
      await this.stopRequest;
      await this.stop();
    } finally {
      for (const s of signals) nodeProcess!.off(s, onSignal);
    }
    if (this.error) throw this.error;
  }

  /**
   * Stops polling and waits for the handlers running to finish and report, for
   * up to timeoutMs (default shutdownGraceMs); then abandons the rest: their
   * task.signal aborts and their leases expire on the server. Resolves to true
   * when nothing had to be abandoned. Idempotent.
   */
  stop(timeoutMs?: number): Promise<boolean> {
    this.stopped ??= this.shutdown(timeoutMs ?? this.shutdownGraceMs);
    return this.stopped;
  }

  private async shutdown(graceMs: number): Promise<boolean> {
    this.polling.abort(new Error("the worker is stopping"));
    this.stopRequested();
    const finished = Promise.all([...this.running.values()].map((r) => r.done)).then(() => true);
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), Math.max(graceMs, 0))));
    const clean = await Promise.race([finished, late]);
    clearTimeout(timer);
    if (!clean) {
      this.log.warn(`abandoning ${this.running.size} tasks still running; their leases expire on the server and they run again`);
      const reason = new Error("the worker is shutting down and abandoned the task");
      this.abandon.abort(reason);
      for (const r of this.running.values()) r.ctl.abort(reason);
    } else {
      this.log.info(`worker ${this.name} stopped`);
    }
    return clean;
  }

  private names(): string[] {
    return [...this.handlers.keys(), ...this.workflows.keys()].sort();
  }

  /** Puts the code definition of each workflow served (the server makes a new revision only when it changed). */
  private async putDefinitions(): Promise<boolean> {
    for (const name of [...this.workflows.keys()].sort()) {
      for (let failures = 1; ; failures++) {
        try {
          await this.client.putDefinition(name, definitionOf(name, this.workflows.get(name)!.options));
          break;
        } catch (e) {
          if (this.polling.signal.aborted) return false;
          if (e instanceof FlowdError && (e instanceof TransportError || (e instanceof APIError && REFUSED.has(e.status)))) {
            this.fail(e, `putting the definition of workflow ${JSON.stringify(name)}`);
            return false;
          }
          if (!(e instanceof FlowdError)) throw e;
          if (failures === 1) this.log.warn(`putting the definition of workflow ${name} failed; retrying: ${e.message}`);
          await sleep(backoff(failures), this.polling.signal);
        }
      }
    }
    if (this.workflows.size > 0) this.answered = true;
    return true;
  }

  // One slot: poll, run, report, until the worker stops.
  private async serve(): Promise<void> {
    if (!(await this.ready)) return;
    const names = this.names();
    let failures = 0;
    while (!this.polling.signal.aborted) {
      const sent = Date.now();
      let polled;
      try {
        polled = await this.client.pollTask({
          worker: this.name, handlers: names, waitSeconds: this.waitSeconds, leaseSeconds: this.leaseSeconds,
          signal: this.polling.signal,
        });
      } catch (e) {
        if (this.polling.signal.aborted) return;
        if (e instanceof APIError && REFUSED.has(e.status)) return this.fail(e, "the server refused to hand out tasks");
        if (e instanceof TransportError && !this.answered) return this.fail(e, "cannot reach the server");
        failures++;
        if (failures === 1) this.log.warn(`polling for tasks failed; retrying with backoff: ${String(e)}`);
        await sleep(backoff(failures), this.polling.signal);
        continue;
      }
      failures = 0;
      this.answered = true;
      if (polled === null) {
        // A server that answers "no task" long before the wait is up must not
        // make this a busy loop.
        if (Date.now() - sent < (this.waitSeconds * 1000) / 2) await sleep(backoff(3), this.polling.signal);
        continue;
      }
      // Leased as the worker stopped: its lease expires and it runs again.
      if (this.polling.signal.aborted) return;
      const ctl = new AbortController();
      const done = this.execute({ ...polled, signal: ctl.signal }, ctl);
      this.running.set(polled.lease, { ctl, done });
      await done;
      this.running.delete(polled.lease);
    }
  }

  private fail(err: FlowdError, what: string): void {
    this.log.error(`worker ${this.name}: ${what}: ${err.message}`);
    this.error ??= err;
    void this.stop();
  }

  private async execute(task: Task, ctl: AbortController): Promise<void> {
    const where = `task ${task.id} (${task.workflowId}/${task.step}, attempt ${task.attempt})`;
    const lease = { until: Date.parse(task.leaseUntil) || Date.now() + (this.leaseSeconds ?? 1) * 1000 };
    const handlerDone = new AbortController();
    const heartbeats = this.keepLease(task, ctl, lease, handlerDone.signal);
    let output: unknown = null;
    let error: string | undefined;
    let retryable = true;
    try {
      output = await this.call(task, lease);
    } catch (e) {
      if (e instanceof RunEnded) {
        handlerDone.abort();
        await heartbeats;
        this.log.info(`${where}: ${e.why}`);
        return;
      }
      error = e instanceof Error ? e.message || e.name : String(e);
      retryable = !(e instanceof PermanentError);
    }
    handlerDone.abort();
    await heartbeats;
    if (ctl.signal.aborted) {
      this.log.warn(`${where} dropped: ${errorMessage(ctl.signal.reason)}`);
      return;
    }
    try {
      if (error === undefined) {
        try {
          await this.report(lease, () => this.client.completeTask(task.id, task.lease, output));
          this.log.info(`${where} completed`);
          return;
        } catch (e) {
          if (!(e instanceof APIError) || (e.status !== 400 && e.status !== 413)) throw e;
          // The server will never take this output (too large, say): another
          // attempt would only produce it again.
          error = `the server refused the handler's output: ${e.message}`;
          retryable = false;
        }
      }
      const message = error;
      await this.report(lease, () => this.client.failTask(task.id, task.lease, message, retryable));
      this.log.info(`${where} failed (retryable: ${retryable}): ${error}`);
    } catch (e) {
      if (e instanceof ConflictError || e instanceof NotFoundError) {
        // Fenced off: whoever holds the step now decides.
        this.log.info(`${where}: outcome not recorded, the worker no longer holds the task: ${e.message}`);
      } else {
        this.log.warn(`${where}: outcome not recorded, the lease expires and the task runs again: ${errorMessage(e)}`);
      }
    }
  }

  private async call(task: Task, lease: { until: number }): Promise<unknown> {
    if (task.kind === "workflow") {
      const w = this.workflows.get(task.handler);
      if (!w) throw new PermanentError(`no workflow ${JSON.stringify(task.handler)} on worker ${this.name}`);
      const o = await runWorkflow(task, w.fn, this.client, (call) => this.report(lease, call));
      if (o.kind === "ended") throw new RunEnded(o.why);
      if (o.kind === "fail") throw o.retryable ? new Error(o.error) : new PermanentError(o.error);
      return o.output;
    }
    const fn = this.handlers.get(task.handler);
    if (!fn) throw new PermanentError(`no handler ${JSON.stringify(task.handler)} on worker ${this.name}`);
    const out = await fn(task);
    let text: string | undefined;
    try {
      text = JSON.stringify(out);
    } catch (e) {
      throw new PermanentError(`handler returned a value that is not JSON: ${errorMessage(e)}`);
    }
    // undefined (no return value) is null, as is an empty output elsewhere in flowd.
    return text === undefined ? null : JSON.parse(text);
  }

  /**
   * Sends an outcome, retrying transport errors, 408, 429 and 5xx with backoff
   * while the lease lasts; any other refusal is final.
   */
  private async report<T>(lease: { until: number }, send: () => Promise<T>): Promise<T> {
    for (let failures = 1; ; failures++) {
      try {
        return await send();
      } catch (e) {
        const status = e instanceof APIError ? e.status : 0;
        if (!(e instanceof FlowdError) || (status >= 400 && status < 500 && status !== 408 && status !== 429)) throw e;
        const d = backoff(failures);
        if (Date.now() + d > lease.until || this.abandon.signal.aborted) throw e;
        await sleep(d, this.abandon.signal);
      }
    }
  }

  /**
   * Heartbeats at a third of what is left of the lease until done aborts;
   * aborts the task when the lease is lost (409/404) or runs out.
   */
  private async keepLease(task: Task, ctl: AbortController, lease: { until: number }, done: AbortSignal): Promise<void> {
    let capped = false; // the step's timeout caps the lease: heartbeats cannot move it
    while (!done.aborted && !ctl.signal.aborted) {
      const left = lease.until - Date.now();
      await sleep(capped ? left : Math.max(left / 3, 50), done);
      if (done.aborted || ctl.signal.aborted) return;
      if (Date.now() >= lease.until) {
        ctl.abort(new Error(capped ? "attempt timed out: the step's timeout caps the lease"
          : "the lease expired: heartbeats did not reach the server"));
        return;
      }
      let until: number;
      try {
        until = Date.parse(await this.client.heartbeat(task.id, task.lease, this.leaseSeconds));
      } catch (e) {
        if (e instanceof ConflictError || e instanceof NotFoundError) {
          ctl.abort(new Error(`lost the lease: ${e.message}`));
          return;
        }
        this.log.warn(`heartbeat of task ${task.id} failed: ${errorMessage(e)}`);
        continue;
      }
      if (!(until > lease.until)) capped = true;
      else lease.until = until;
    }
  }
}

function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
