// Workflows as code. A workflow's function runs on this worker; each of its
// steps is recorded on the server as it finishes, and after a crash, a lost
// lease or a wait the function runs again from the top: every step already
// recorded returns its recorded result instead of running again. So a function
// must make the same calls in the same order every time it runs (decide on
// recorded values only: use ctx.now, ctx.random and ctx.uuid).
//
// The protocol is docs/code-workflows.md, "The protocol, for other languages";
// this mirrors the Go SDK (worker/workflow.go).

import type { Client, JournalEntry, Task, Wait } from "./client.js";
import {
  BadRequestError, CancelledError, ConflictError, NonDeterminismError, NotFoundError, PermanentError,
  StepFailedError, TimeoutError, TooLargeError,
} from "./errors.js";

/** How often and how fast a failure is tried again; unset fields take the defaults (3 attempts, 1 s doubling up to 1 min). */
export interface RetryPolicy {
  maxAttempts?: number;
  initialBackoffMs?: number;
  maxBackoffMs?: number;
}

/** What goes into the code definition the worker puts when it starts. */
export interface WorkflowOptions {
  /** The workflow's timeout: milliseconds, or a duration such as "1h". */
  timeout?: number | string;
  /** The retry of the function's runs that fail (not of its steps: each has its own). */
  retry?: RetryPolicy;
}

/** A code workflow's function: its input, and (resolving to) the workflow's output, any JSON value. */
export type WorkflowFunction<I = any, O = unknown> = (ctx: WorkflowContext, input: I) => Promise<O> | O;

/** What a step's function gets. */
export interface StepInfo {
  /** WORKFLOW_ID/NAME (the numbered name), the same for every attempt and run: key side effects on it. */
  idempotencyKey: string;
  /** The attempt within this run, from 1. */
  attempt: number;
  /** Aborted when the run loses its lease. */
  signal: AbortSignal;
}

export interface StepOptions {
  /** The step's own retry, in the worker (default 3 attempts, 1 s doubling up to 1 min). */
  retry?: RetryPolicy;
}

export interface EventOptions {
  /** Only events published with this key (default ""). */
  key?: string;
  /** Past it the wait throws TimeoutError: milliseconds, or a duration such as "1h". */
  timeout?: number | string;
}

/** The code definition of a workflow served under name (as the Go worker puts it). */
export function definitionOf(name: string, options: WorkflowOptions = {}): Record<string, unknown> {
  const def: Record<string, unknown> = { name, code: { handler: name } };
  if (options.timeout !== undefined) def.timeout = duration(options.timeout, "timeout");
  const p = options.retry;
  if (p) {
    const retry: Record<string, unknown> = {};
    if (p.maxAttempts && p.maxAttempts > 0) retry.max_attempts = p.maxAttempts;
    if (p.initialBackoffMs && p.initialBackoffMs > 0) retry.initial_backoff = `${p.initialBackoffMs}ms`;
    if (p.maxBackoffMs && p.maxBackoffMs > 0) retry.max_backoff = `${p.maxBackoffMs}ms`;
    def.retry = retry;
  }
  return def;
}

/** A duration as the server takes it: a number of milliseconds, or a Go duration string such as "10s". */
function duration(d: number | string, what: string): string {
  if (typeof d === "number") {
    if (!Number.isFinite(d) || d < 0) throw new RangeError(`${what}: ${d} is not a duration in milliseconds`);
    return `${Math.round(d)}ms`;
  }
  if (typeof d !== "string" || !/^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$/.test(d)) {
    throw new RangeError(`${what}: ${JSON.stringify(d)} is not a duration such as "10s", "5m" or "1h30m"`);
  }
  return d;
}

/** How a run ended, for the worker to report. */
export type RunOutcome =
  | { kind: "complete"; output: unknown }
  | { kind: "fail"; error: string; retryable: boolean }
  /** Suspended, or the lease was lost: nothing (more) to report. */
  | { kind: "ended"; why: string };

type Send = <T>(call: () => Promise<T>) => Promise<T>;

const FINISHED = new Set(["COMPLETED", "FAILED", "CANCELLED"]);

function nameProblem(name: string): string | undefined {
  if (typeof name !== "string" || name.length === 0 || name.length > 128) {
    return `step name ${JSON.stringify(name)} must be 1-128 characters long`;
  }
  const bad = /[^A-Za-z0-9._:-]/.exec(name);
  if (bad) return `step name ${JSON.stringify(name)} has ${JSON.stringify(bad[0])}: use [A-Za-z0-9._:-]`;
  return undefined;
}

/** The message of a recorded error: a string, or an object's message. */
function errorText(raw: unknown): string {
  if (typeof raw === "string") return raw;
  if (raw && typeof raw === "object" && typeof (raw as { message?: unknown }).message === "string") {
    return (raw as { message: string }).message;
  }
  return JSON.stringify(raw ?? null);
}

function errorType(raw: unknown): string {
  return raw && typeof raw === "object" && typeof (raw as { type?: unknown }).type === "string"
    ? (raw as { type: string }).type : "";
}

function message(e: unknown): string {
  return e instanceof Error ? e.message || e.name : String(e);
}

/** A copy of v through JSON, as the server will record it (undefined: null). */
function asJSON(v: unknown, what: string): unknown {
  let text: string | undefined;
  try {
    text = JSON.stringify(v);
  } catch (e) {
    throw new PermanentError(`${what} is not JSON: ${message(e)}`);
  }
  return text === undefined ? null : JSON.parse(text);
}

const never = new Promise<never>(() => {});

function nextTurn(): Promise<void> {
  const g = globalThis as { setImmediate?: (fn: () => void) => unknown };
  return new Promise((resolve) => (g.setImmediate ? g.setImmediate(resolve) : setTimeout(resolve, 0)));
}

function delay(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, Math.min(Math.max(ms, 0), 3_600_000));
    signal.addEventListener("abort", done);
  });
}

/** Marks p handled, so that a step started and never awaited cannot crash the process with an unhandled rejection. */
function handled<T>(p: Promise<T>): Promise<T> {
  p.catch(() => {});
  return p;
}

interface PendingWait {
  wait: Wait;
}

/**
 * One run of a code workflow, as its function sees it. Every method that
 * records something returns a promise; start parallel steps together and await
 * them with Promise.all. When the run ends (it waits, or lost its lease), the
 * promises of the calls still open never settle (a lost lease: they reject
 * with CancelledError) and the calls made after do nothing.
 */
export class WorkflowContext {
  /** The workflow's id. */
  readonly workflowId: string;
  /** Counts the runs since the start or the last wait (1 for the first). */
  readonly attempt: number;
  /** The workflow's input. */
  readonly input: unknown;
  /** Aborted when the run is over: it waits, lost its lease, or found non-determinism. */
  readonly signal: AbortSignal;

  private readonly task: Task;
  private readonly client: Client;
  private readonly send: Send;
  private readonly journal: Record<string, JournalEntry>;
  private readonly uses = new Map<string, number>();
  private readonly inflight = new Set<Promise<unknown>>();
  private readonly waits = new Map<string, PendingWait>();
  private suspending?: Promise<void>;
  private returned = false;
  private readonly over = new AbortController();
  /** The outcome once the run is over by itself (not by the function returning). */
  outcome?: RunOutcome;
  private endRun!: (o: RunOutcome) => void;
  /** Resolves with the outcome when the run ends before the function returns. */
  readonly ended: Promise<RunOutcome> = new Promise((resolve) => (this.endRun = resolve));

  /** @internal made by the worker for each run. */
  constructor(task: Task, client: Client, send: Send) {
    this.task = task;
    this.client = client;
    this.send = send;
    this.workflowId = task.workflowId;
    this.attempt = task.attempt;
    this.input = task.input;
    this.journal = { ...(task.journal ?? {}) };
    this.signal = this.over.signal;
    if (task.signal.aborted) this.end({ kind: "ended", why: "the run lost its lease" });
    else {
      task.signal.addEventListener("abort", () =>
        this.end({ kind: "ended", why: `the run lost its lease: ${message(task.signal.reason)}` }), { once: true });
    }
  }

  /**
   * Runs fn as the step name unless it is recorded, and resolves to its
   * output: fn's, or the recorded one. fn runs at least once until recorded: key
   * its side effects on info.idempotencyKey. A step that fails for good (its
   * attempts spent, or a PermanentError) rejects with StepFailedError.
   */
  step<T>(name: string, fn: (info: StepInfo) => Promise<T> | T, options: StepOptions = {}): Promise<T> {
    if (this.outcome) return this.afterEnd();
    const key = this.key(name);
    if (key === undefined) return never;
    const entry = this.recorded(key, "step");
    if (entry === null) return never;
    if (entry) return handled(Promise.resolve().then(() => this.stepValue<T>(key, entry)));
    const p = this.runStep(key, fn, options.retry ?? {}).then((e) => this.stepValue<T>(key, e));
    const tracked = p.then(() => {}, () => {});
    this.inflight.add(tracked);
    void tracked.then(() => this.inflight.delete(tracked));
    return handled(p);
  }

  /** Sleeps ms (a number of milliseconds, or a duration such as "10s"), recorded as name: the run ends and the next one starts when the timer is due. */
  sleep(name: string, ms: number | string): Promise<void> {
    let d: string;
    try {
      d = duration(ms, `sleep ${JSON.stringify(name)}`);
    } catch (e) {
      return this.fatal(message(e));
    }
    return this.wait(name, "sleep", { sleep: d }).then(() => undefined);
  }

  /**
   * Waits, recorded as name, for the event published under event (with
   * options.key) and resolves to its data; an event published since the
   * workflow started counts. Past options.timeout it rejects with TimeoutError.
   */
  waitForEvent<T = unknown>(name: string, event: string, options: EventOptions = {}): Promise<T> {
    const w: { event: string; key?: string; timeout?: string } = { event };
    if (options.key !== undefined) w.key = options.key;
    if (options.timeout !== undefined) {
      try {
        w.timeout = duration(options.timeout, `waitForEvent ${JSON.stringify(name)}: timeout`);
      } catch (e) {
        return this.fatal(message(e));
      }
    }
    return this.wait(name, "event", w) as Promise<T>;
  }

  /**
   * Starts, recorded as name, a child workflow of definition (of any kind) with
   * input, waits for it and resolves to its output; a child that does not
   * complete rejects with StepFailedError.
   */
  child<T = unknown>(name: string, definition: string, input?: unknown): Promise<T> {
    let value: unknown;
    try {
      value = asJSON(input, `the input of child ${JSON.stringify(name)}`);
    } catch (e) {
      return this.fatal(message(e));
    }
    return this.wait(name, "child", { child: { definition, input: value } }) as Promise<T>;
  }

  /** Writes state.variables.KEY = value: GET /v1/workflows/{id} shows it. A replay that sets the same value writes nothing. */
  async set(key: string, value: unknown): Promise<void> {
    if (this.outcome) return this.afterEnd();
    const v = asJSON(value, `variable ${JSON.stringify(key)}`);
    try {
      await this.send(() => this.client.setVariable(this.task.id, this.task.lease, key, v));
    } catch (e) {
      if (e instanceof ConflictError || e instanceof NotFoundError) {
        this.end({ kind: "ended", why: `the run lost its lease: ${e.message}` });
        throw new CancelledError(`setting variable ${JSON.stringify(key)}: the run lost its lease: ${e.message}`);
      }
      throw e;
    }
  }

  /**
   * Sets the workflow's search attribute NAME ([a-z][a-z0-9_]{0,62}) to a
   * string, a number or a boolean: GET /v1/workflows?search.NAME=VALUE finds
   * it from then on. Setting the value it has writes nothing, so a replay
   * costs no version. BadRequestError for a bad name or value.
   */
  async search(name: string, value: string | number | boolean): Promise<void> {
    if (this.outcome) return this.afterEnd();
    try {
      await this.send(() => this.client.setSearch(this.task.id, this.task.lease, name, value));
    } catch (e) {
      if (e instanceof ConflictError || e instanceof NotFoundError) {
        this.end({ kind: "ended", why: `the run lost its lease: ${e.message}` });
        throw new CancelledError(`setting search attribute ${JSON.stringify(name)}: the run lost its lease: ${e.message}`);
      }
      throw e;
    }
  }

  /** The time, recorded as the step flowd:now: the same in every run. */
  async now(): Promise<Date> {
    return new Date(await this.step("flowd:now", () => new Date().toISOString()));
  }

  /** A number in [0, 1), recorded as the step flowd:random. */
  random(): Promise<number> {
    return this.step("flowd:random", () => {
      const b = new Uint32Array(2);
      crypto.getRandomValues(b);
      // 53 random bits, as the Go SDK draws.
      return ((b[0]! >>> 5) * 2 ** 26 + (b[1]! >>> 6)) / 2 ** 53; // 27 + 26 bits
    });
  }

  /** A random (version 4) UUID, recorded as the step flowd:uuid. */
  uuid(): Promise<string> {
    return this.step("flowd:uuid", () => crypto.randomUUID());
  }

  // Plumbing.

  /** The name a call of name records under: name, then name#2, name#3, … in call order. */
  private key(name: string): string | undefined {
    const problem = nameProblem(name);
    if (problem) {
      // A mistake of the code: no run would get past it.
      this.end({ kind: "fail", error: problem, retryable: false });
      return undefined;
    }
    const n = (this.uses.get(name) ?? 0) + 1;
    this.uses.set(name, n);
    return n > 1 ? `${name}#${n}` : name;
  }

  /** The journal's entry of key when it is of kind; undefined when unrecorded; null when another kind is recorded (the run is over). */
  private recorded(key: string, kind: string): JournalEntry | undefined | null {
    const e = this.journal[key];
    if (!e) return undefined;
    const was = e.kind || "step";
    if (was !== kind) {
      const err = new NonDeterminismError(key, was, kind);
      this.end({ kind: "fail", error: err.message, retryable: false });
      return null;
    }
    return e;
  }

  private stepValue<T>(key: string, e: JournalEntry): T {
    if (e.status === "FAILED") throw new StepFailedError(key, errorText(e.error), e.attempts ?? 1);
    return (e.output ?? null) as T;
  }

  private fatal(error: string): Promise<never> {
    this.end({ kind: "fail", error, retryable: false });
    return never;
  }

  private afterEnd(): Promise<never> {
    return this.outcome?.kind === "ended" && this.outcome.why.startsWith("the run lost its lease")
      ? handled(Promise.reject(new CancelledError(this.outcome.why)))
      : never;
  }

  /** Ends the run (the first outcome wins). */
  end(o: RunOutcome): void {
    if (this.outcome) return;
    this.outcome = o;
    this.over.abort(new CancelledError(o.kind === "ended" ? o.why : "the run is over"));
    this.endRun(o);
  }

  private async runStep<T>(key: string, fn: (info: StepInfo) => Promise<T> | T, retry: RetryPolicy): Promise<JournalEntry> {
    const maxAttempts = retry.maxAttempts && retry.maxAttempts > 0 ? retry.maxAttempts : 3;
    const initial = retry.initialBackoffMs && retry.initialBackoffMs > 0 ? retry.initialBackoffMs : 1000;
    const max = retry.maxBackoffMs && retry.maxBackoffMs > 0 ? retry.maxBackoffMs : 60_000;
    const idempotencyKey = `${this.workflowId}/${key}`;
    let outcome: { output: unknown; attempts: number } | { error: string; attempts: number };
    for (let attempt = 1; ; attempt++) {
      try {
        const out = await fn({ idempotencyKey, attempt, signal: this.signal });
        outcome = { output: asJSON(out, `the output of step ${JSON.stringify(key)}`), attempts: attempt };
        break;
      } catch (e) {
        if (this.outcome) throw new CancelledError(`step ${JSON.stringify(key)}: the run is over`);
        if (e instanceof PermanentError || attempt >= maxAttempts) {
          outcome = { error: message(e), attempts: attempt };
          break;
        }
        await delay(Math.min(initial * 2 ** (attempt - 1), max), this.signal);
        if (this.outcome) throw new CancelledError(`step ${JSON.stringify(key)}: the run is over`);
      }
    }
    try {
      const entry = await this.send(() => this.client.checkpointStep(this.task.id, this.task.lease, key, outcome));
      this.journal[key] = entry;
      return entry;
    } catch (e) {
      if (e instanceof ConflictError || e instanceof NotFoundError) {
        this.end({ kind: "ended", why: `the run lost its lease: ${e.message}` });
        throw new CancelledError(`step ${JSON.stringify(key)}: the run lost its lease: ${e.message}`);
      }
      if (e instanceof BadRequestError || e instanceof TooLargeError) {
        this.end({ kind: "fail", error: `the server refused the outcome of step ${JSON.stringify(key)}: ${e.message}`, retryable: false });
      } else {
        this.end({ kind: "fail", error: `recording step ${JSON.stringify(key)}: ${message(e)}`, retryable: true });
      }
      throw e;
    }
  }

  /**
   * A wait: a finished entry settles at once; otherwise the wait joins the
   * ones the run will suspend for, once the code has started all it starts in
   * this turn and the steps in flight are recorded.
   */
  private wait(name: string, kind: string, w: Wait): Promise<unknown> {
    if (this.outcome) return this.afterEnd();
    const key = this.key(name);
    if (key === undefined) return never;
    const e = this.recorded(key, kind);
    if (e === null) return never;
    if (e && FINISHED.has(e.status)) {
      return handled(Promise.resolve().then(() => {
        if (e.status === "COMPLETED") return e.output ?? null;
        if (errorType(e.error) === "timeout") throw new TimeoutError(key, errorText(e.error));
        throw new StepFailedError(key, errorText(e.error), Math.max(e.attempts ?? 0, 1));
      }));
    }
    this.waits.set(key, { wait: w });
    this.suspending ??= this.suspend();
    return never;
  }

  /** Ends the run waiting for every wait started, once the code is idle. */
  private async suspend(): Promise<void> {
    // Let the code start what it starts with this wait (Promise.all over
    // several), and let the steps in flight be recorded (the code may start
    // more waits after them): until a turn passes with nothing in flight.
    for (;;) {
      await nextTurn();
      if (this.outcome || this.returned) return;
      if (this.inflight.size === 0) break;
      await Promise.all([...this.inflight]);
    }
    const waits: Record<string, Wait> = {};
    for (const [k, p] of this.waits) waits[k] = p.wait;
    try {
      await this.send(() => this.client.suspendTask(this.task.id, this.task.lease, waits));
      this.end({ kind: "ended", why: `the run waits for ${Object.keys(waits).join(", ")}` });
    } catch (e) {
      if (e instanceof ConflictError || e instanceof NotFoundError) {
        this.end({ kind: "ended", why: `the run lost its lease: ${e.message}` });
      } else {
        this.end({ kind: "fail", error: `suspending the run: ${message(e)}`, retryable: !(e instanceof BadRequestError) });
      }
    }
  }

  /** @internal the function returned: waits for the steps in flight (and a suspend under way). */
  async settle(): Promise<void> {
    while (this.inflight.size > 0) await Promise.all([...this.inflight]);
    // A suspend already sent decides; one not sent yet is dropped.
    this.returned = true;
    await this.suspending;
  }
}

/** Runs one run of fn for task: how it ended, for the worker to report. */
export async function runWorkflow(task: Task, fn: WorkflowFunction, client: Client, send: Send): Promise<RunOutcome> {
  const ctx = new WorkflowContext(task, client, send);
  const result = (async () => fn(ctx, task.input))().then(
    (value) => ({ ok: true as const, value }), (error: unknown) => ({ ok: false as const, error }));
  const first = await Promise.race([result, ctx.ended]);
  if ("kind" in first) return first;
  await ctx.settle();
  if (ctx.outcome) return ctx.outcome;
  let o: RunOutcome;
  if (first.ok) {
    try {
      o = { kind: "complete", output: asJSON(first.value, "the workflow's output") };
    } catch (e) {
      o = { kind: "fail", error: message(e), retryable: false };
    }
  } else {
    const e = first.error;
    if (e instanceof CancelledError) {
      o = { kind: "ended", why: e.message };
    } else {
      // A step that failed for good or a wait that timed out would fail the
      // same way in a replay: the workflow fails at once.
      const settled = e instanceof PermanentError || e instanceof StepFailedError || e instanceof TimeoutError
        || e instanceof NonDeterminismError;
      o = { kind: "fail", error: message(e), retryable: !settled };
    }
  }
  ctx.end(o);
  return o;
}
