import assert from "node:assert/strict";
import { after, before, beforeEach, describe, test } from "node:test";
import { Client, NotFoundError, PermanentError, Worker } from "../dist/src/index.js";
import { startServer, unique, waitFor } from "./flowd-server.mjs";

const quiet = { info() {}, warn() {}, error() {} };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Each test serves a handler name of its own, so that workers of other tests
// never take its tasks.
describe("Worker against flowd serve", () => {
  let server, client, handler;
  const workers = [];
  before(async () => {
    server = await startServer();
    client = server.client;
  });
  beforeEach(() => {
    handler = unique("h");
  });
  after(async () => {
    await Promise.all(workers.map((w) => w.stop(0)));
    await server.close();
  });

  async function define(step) {
    const name = unique("def");
    await client.putDefinition(name, { name, steps: [{ id: "a", type: "task", handler, ...step }] });
    return name;
  }

  function startWorker(fn, options = {}) {
    const w = new Worker(client, { name: unique("w"), waitSeconds: 1, logger: quiet, ...options });
    w.handle(handler, fn);
    w.start();
    workers.push(w);
    return w;
  }

  test("completes the step with the handler's output", async () => {
    const definition = await define({ input: { name: "{{ .input.name }}" } });
    startWorker(async (task) => ({
      greeting: `Hello, ${task.input.name}!`, attempt: task.attempt, key: task.idempotencyKey,
      index: task.index ?? null, step: task.step,
    }));
    const inst = await client.startWorkflow({ definition, input: { name: "Ada" } });
    const done = await waitFor(client, inst.id);
    assert.equal(done.status, "COMPLETED");
    assert.deepEqual(done.state.steps.a.output, {
      greeting: "Hello, Ada!", attempt: 1, key: `${inst.id}/a`, index: null, step: "a",
    });
  });

  test("foreach iterations get their index", async () => {
    const definition = await define({ foreach: ".input.items", input: { item: "{{ .item }}" } });
    startWorker((t) => ({ index: t.index, item: t.input.item, key: t.idempotencyKey }), { concurrency: 2 });
    const inst = await client.startWorkflow({ definition, input: { items: ["x", "y", "z"] } });
    const done = await waitFor(client, inst.id);
    assert.equal(done.status, "COMPLETED");
    assert.deepEqual(done.state.steps.a.output,
      ["x", "y", "z"].map((item, index) => ({ index, item, key: `${inst.id}/a/${index}` })));
  });

  test("a failing handler is retried", async () => {
    const definition = await define({ retry: { max_attempts: 3, initial_backoff: "50ms", max_backoff: "100ms" } });
    startWorker((task) => {
      if (task.attempt === 1) throw new Error("the database blinked");
      return { attempt: task.attempt };
    });
    const done = await waitFor(client, (await client.startWorkflow({ definition })).id);
    assert.equal(done.status, "COMPLETED");
    assert.deepEqual(done.state.steps.a.output, { attempt: 2 });
    assert.equal(done.state.steps.a.attempts, 2);
  });

  test("a permanent error fails the step without retry", async () => {
    const definition = await define({ retry: { max_attempts: 5, initial_backoff: "50ms" } });
    const calls = [];
    startWorker(async (task) => {
      calls.push(task.attempt);
      throw new PermanentError("input.amount must be positive");
    });
    const done = await waitFor(client, (await client.startWorkflow({ definition })).id);
    assert.equal(done.status, "FAILED");
    assert.equal(done.state.steps.a.status, "FAILED");
    assert.equal(done.state.steps.a.attempts, 1);
    assert.match(done.state.steps.a.error, /input.amount must be positive/);
    assert.deepEqual(calls, [1]);
  });

  test("a value that is not JSON fails the step", async () => {
    const definition = await define({});
    startWorker(() => ({ big: 1n }));
    const done = await waitFor(client, (await client.startWorkflow({ definition })).id);
    assert.equal(done.status, "FAILED");
    assert.match(done.state.steps.a.error, /not JSON/);
  });

  test("heartbeats keep a task longer than its lease", async () => {
    const definition = await define({});
    const calls = [];
    startWorker(async (task) => {
      calls.push(task.attempt);
      // Well past two leases: without heartbeats the sweeper would take the task
      // back and deliver it again as attempt 2.
      await sleep(5000);
      return { attempt: task.attempt, aborted: task.signal.aborted };
    }, { leaseSeconds: 2 });
    const done = await waitFor(client, (await client.startWorkflow({ definition })).id);
    assert.equal(done.status, "COMPLETED");
    assert.deepEqual(done.state.steps.a.output, { attempt: 1, aborted: false });
    assert.equal(done.state.steps.a.attempts, 1);
    assert.deepEqual(calls, [1]);
  });

  test("a lost lease aborts the task's signal", async () => {
    const definition = await define({});
    let running;
    const started = new Promise((r) => (running = r));
    const reasons = [];
    startWorker(async (task) => {
      running();
      await new Promise((r) => task.signal.addEventListener("abort", r));
      reasons.push(task.signal.reason.message);
      return "dropped anyway";
    }, { leaseSeconds: 1 });
    const inst = await client.startWorkflow({ definition });
    await started;
    // Completing the step by hand takes the task away from the worker.
    await client.completeStep(inst.id, "a", "by hand", "*");
    const done = await waitFor(client, inst.id);
    for (let i = 0; i < 400 && reasons.length === 0; i++) await sleep(50);
    assert.equal(done.state.steps.a.output, "by hand");
    assert.equal(reasons.length, 1);
    assert.match(reasons[0], /lost the lease/);
  });

  test("the step's timeout aborts the task", async () => {
    const definition = await define({ timeout: "2s", retry: { max_attempts: 1 } });
    const tasks = [];
    // Heartbeats cannot move the lease past the step's timeout.
    startWorker(async (task) => {
      tasks.push(task);
      await new Promise((r) => task.signal.addEventListener("abort", r));
      return "too late";
    }, { leaseSeconds: 1 });
    const done = await waitFor(client, (await client.startWorkflow({ definition })).id);
    assert.equal(done.status, "FAILED");
    assert.match(done.state.steps.a.error, /timed out/);
    assert.equal(tasks.length, 1);
    for (let i = 0; i < 400 && !tasks[0].signal.aborted; i++) await sleep(50);
    assert.equal(tasks[0].signal.aborted, true, "the handler is told to give up");
  });

  test("stop lets a running handler finish", async () => {
    const definition = await define({});
    let running;
    const started = new Promise((r) => (running = r));
    const w = startWorker(async () => {
      running();
      await sleep(1000);
      return "finished";
    }, { waitSeconds: 20 });
    const inst = await client.startWorkflow({ definition });
    await started;
    assert.equal(await w.stop(15_000), true, "nothing abandoned");
    // The outcome is reported before stop resolves.
    const afterStop = await client.getWorkflow(inst.id);
    assert.equal(afterStop.status, "COMPLETED");
    assert.equal(afterStop.state.steps.a.output, "finished");
  });

  test("stop abandons a handler past the grace", async () => {
    const definition = await define({});
    let running;
    const started = new Promise((r) => (running = r));
    const tasks = [];
    const w = startWorker(async (task) => {
      tasks.push(task);
      running();
      await new Promise((r) => task.signal.addEventListener("abort", r));
      return "too late";
    });
    const inst = await client.startWorkflow({ definition });
    await started;
    assert.equal(await w.stop(100), false);
    assert.equal(tasks[0].signal.aborted, true);
    assert.match(tasks[0].signal.reason.message, /abandoned/);
    assert.equal((await client.getWorkflow(inst.id)).state.steps.a.status, "RUNNING");
  });

  test("a server that refuses the worker stops it with the error", async () => {
    const w = new Worker(new Client(`${server.url}/not-flowd`), { waitSeconds: 1, logger: quiet });
    w.handle(handler, () => null);
    await assert.rejects(w.run({ handleSignals: false }), NotFoundError);
  });

  test("invalid options and names", () => {
    for (const options of [{ concurrency: 0 }, { leaseSeconds: 0.5 }, { waitSeconds: 61 }]) {
      assert.throws(() => new Worker(client, options), RangeError, JSON.stringify(options));
    }
    const w = new Worker(client);
    for (const name of ["", "flowd:sleep"]) assert.throws(() => w.handle(name, () => null), RangeError);
    assert.throws(() => w.start(), /register at least one handler/);
  });
});
