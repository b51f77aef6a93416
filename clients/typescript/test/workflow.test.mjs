// Code workflows (worker.workflow) against a real flowd serve.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  CancelledError, NonDeterminismError, PermanentError, StepFailedError, TimeoutError, Worker,
} from "../dist/src/index.js";
import { startServer, unique, waitFor } from "./flowd-server.mjs";

const quiet = { info() {}, warn() {}, error() {} };

/** Polls fn until it returns a truthy value. */
async function until(fn, what, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

async function publish(url, name, key, data) {
  const resp = await fetch(`${url}/v1/events`, {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ name, key, data }),
  });
  assert.ok(resp.ok, `publishing ${name}: ${resp.status} ${await resp.text()}`);
}

function causes(history) {
  return history.map((v) => v.cause ?? "");
}

describe("code workflows against flowd serve", () => {
  let server, client;
  const workers = [];
  before(async () => {
    server = await startServer();
    client = server.client;
  });
  after(async () => {
    await Promise.all(workers.map((w) => w.stop(0)));
    await server.close();
  });

  /** Serves fn as a workflow of a name of its own (and extra workflows); returns the name. */
  function serve(fn, options = {}, extra = {}) {
    const name = unique("wf");
    const w = new Worker(client, { name: unique("w"), waitSeconds: 1, logger: quiet, concurrency: 2 });
    w.workflow(name, fn, options);
    for (const [n, f] of Object.entries(extra)) w.workflow(n, f);
    w.start();
    workers.push(w);
    return name;
  }

  async function run(definition, input, id = unique("i")) {
    // The worker puts the definition as it starts: retry until it is there.
    await until(async () => {
      try {
        return await client.startWorkflow({ id, definition, input });
      } catch (e) {
        if (e.status === 404) return null;
        throw e;
      }
    }, `definition ${definition}`);
    return id;
  }

  test("puts the code definition, records steps once and replays them after a sleep", async () => {
    const calls = { a: 0, b: 0, runs: 0 };
    const name = serve(async (ctx, input) => {
      calls.runs++;
      const a = await ctx.step("a", (info) => {
        calls.a++;
        return { key: info.idempotencyKey, n: input.n };
      });
      await ctx.sleep("nap", 100);
      const b = await ctx.step("b", () => {
        calls.b++;
        return a.n + 1;
      });
      return { a, b };
    }, { timeout: "1h", retry: { maxAttempts: 2, initialBackoffMs: 100 } });
    const id = await run(name, { n: 41 });
    const done = await waitFor(client, id);
    assert.equal(done.status, "COMPLETED", JSON.stringify(done.state));
    assert.deepEqual(done.output, { a: { key: `${id}/a`, n: 41 }, b: 42 });
    assert.deepEqual(calls, { a: 1, b: 1, runs: 2 });
    const steps = done.state.steps;
    assert.deepEqual([steps.a.kind, steps.a.seq, steps.a.status], ["step", 1, "COMPLETED"]);
    assert.deepEqual([steps.nap.kind, steps.nap.seq, steps.nap.status], ["sleep", 2, "COMPLETED"]);
    assert.deepEqual([steps.b.kind, steps.b.seq], ["step", 3]);
    const c = causes(await client.getHistory(id));
    assert.equal(c.filter((x) => x === 'step "a" completed').length, 1, c.join("\n"));
    const def = await (await fetch(`${server.url}/v1/definitions/${name}`)).json();
    assert.deepEqual(def.code ?? def.definition?.code, { handler: name }, JSON.stringify(def));
  });

  test("a name used again is numbered; parallel steps are each checkpointed; now/random/uuid are recorded", async () => {
    const seen = [];
    const name = serve(async (ctx) => {
      const t = await ctx.now();
      const r = await ctx.random();
      const u = await ctx.uuid();
      const outs = await Promise.all([1, 2, 3].map((i) => ctx.step("p", async (info) => {
        await new Promise((res) => setTimeout(res, (4 - i) * 20));
        return info.idempotencyKey;
      })));
      seen.push({ t: t.toISOString(), r, u });
      await ctx.sleep("nap", 10);
      return { outs, t: t.toISOString(), r, u };
    });
    const id = await run(name);
    const done = await waitFor(client, id);
    assert.equal(done.status, "COMPLETED", JSON.stringify(done.state));
    assert.deepEqual(done.output.outs, [`${id}/p`, `${id}/p#2`, `${id}/p#3`]);
    assert.equal(seen.length, 2);
    assert.deepEqual(seen[0], seen[1]);
    assert.ok(done.output.r >= 0 && done.output.r < 1);
    assert.match(done.output.u, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    const steps = done.state.steps;
    for (const k of ["flowd:now", "flowd:random", "flowd:uuid", "p", "p#2", "p#3"]) assert.equal(steps[k].status, "COMPLETED", k);
    // The slowest started first: recorded last.
    assert.ok(steps["p#3"].seq < steps["p"].seq, JSON.stringify(steps));
  });

  test("waits awaited together suspend the run once, with all of them", async () => {
    let runs = 0;
    const name = serve(async (ctx, input) => {
      runs++;
      const [, paid] = await Promise.all([ctx.sleep("grace", 300), ctx.waitForEvent("paid", "payment", { key: input.order })]);
      return paid;
    });
    const order = unique("o");
    const id = await run(name, { order });
    const waiting = await until(async () => {
      const i = await client.getWorkflow(id);
      return i.state.steps?.grace && i.state.steps?.paid ? i : null;
    }, "both waits");
    assert.equal(waiting.state.steps.paid.status, "WAITING");
    // The sleep finishes first: the next run suspends again for the event alone.
    await until(async () => {
      const i = await client.getWorkflow(id);
      return i.state.steps.grace.status === "COMPLETED" && i.state.code?.run === 2 && i.state.code?.waiting;
    }, "the second run waiting for the event");
    assert.equal(runs, 2);
    await publish(server.url, "payment", order, { amount: 5 });
    const done = await waitFor(client, id);
    assert.equal(done.status, "COMPLETED", JSON.stringify(done.state));
    assert.deepEqual(done.output, { amount: 5 });
    assert.equal(runs, 3);
    const c = causes(await client.getHistory(id)).filter((x) => x.startsWith("run waits"));
    assert.equal(c.length >= 1, true);
    assert.ok(c[0].includes("grace") && c[0].includes("paid"), c.join("\n"));
  });

  test("an event published before the wait and one after", async () => {
    const name = serve(async (ctx, input) => {
      await ctx.step("first", () => true);
      await ctx.waitForEvent("go", "go", { key: input.key }); // published before the workflow waits
      const second = await ctx.waitForEvent("data", "data", { key: input.key });
      return second;
    });
    const key = unique("k");
    // Before: the workflow exists but has not reached the wait... nor even run.
    const id = unique("i");
    await until(async () => {
      try {
        const w = await client.startWorkflow({ id, definition: name, input: { key } });
        await publish(server.url, "go", key, { early: true });
        return w;
      } catch (e) {
        if (e.status === 404) return null;
        throw e;
      }
    }, "start");
    await until(async () => (await client.getWorkflow(id)).state.steps?.data?.status === "WAITING", "the second wait");
    await publish(server.url, "data", key, { late: true });
    const done = await waitFor(client, id);
    assert.equal(done.status, "COMPLETED", JSON.stringify(done.state));
    assert.deepEqual(done.output, { late: true });
    assert.deepEqual(done.state.steps.go.output, { early: true });
  });

  test("an event wait past its timeout throws TimeoutError", async () => {
    const name = serve(async (ctx) => {
      try {
        await ctx.waitForEvent("never", "never-published", { timeout: 200 });
        return "came";
      } catch (e) {
        return { timeout: e instanceof TimeoutError, step: e.step };
      }
    });
    const done = await waitFor(client, await run(name));
    assert.equal(done.status, "COMPLETED", JSON.stringify(done.state));
    assert.deepEqual(done.output, { timeout: true, step: "never" });
  });

  test("a child workflow's output", async () => {
    const childName = unique("child");
    const name = serve(async (ctx, input) => {
      const out = await ctx.child("kid", childName, { x: input.x });
      let failed;
      try {
        await ctx.child("bad-kid", childName, { x: -1 });
      } catch (e) {
        failed = e instanceof StepFailedError;
      }
      return { out, failed };
    }, {}, {
      [childName]: async (ctx, input) => {
        if (input.x < 0) throw new PermanentError("negative");
        return ctx.step("double", () => input.x * 2);
      },
    });
    const done = await waitFor(client, await run(name, { x: 21 }));
    assert.equal(done.status, "COMPLETED", JSON.stringify(done.state));
    assert.deepEqual(done.output, { out: 42, failed: true });
    assert.equal(done.state.steps.kid.kind, "child");
  });

  test("a step that fails for good is caught and compensated", async () => {
    const effects = [];
    const name = serve(async (ctx) => {
      const res = await ctx.step("reserve", () => (effects.push("reserve"), "r1"));
      try {
        await ctx.step("ship", () => {
          effects.push("ship");
          throw new Error("no carrier");
        }, { retry: { maxAttempts: 2, initialBackoffMs: 10 } });
        return "shipped";
      } catch (e) {
        assert.ok(e instanceof StepFailedError);
        await ctx.step("release", () => (effects.push(`release ${res}`), true));
        return { status: "compensated", reason: e.detail, attempts: e.attempts };
      }
    });
    const done = await waitFor(client, await run(name));
    assert.equal(done.status, "COMPLETED", JSON.stringify(done.state));
    assert.deepEqual(done.output, { status: "compensated", reason: "no carrier", attempts: 2 });
    assert.deepEqual(effects, ["reserve", "ship", "ship", "release r1"]);
    assert.equal(done.state.steps.ship.status, "FAILED");
    assert.equal(done.state.steps.ship.attempts, 2);
  });

  test("an uncaught StepFailedError fails the workflow without retrying the run", async () => {
    let runs = 0;
    const name = serve(async (ctx) => {
      runs++;
      await ctx.step("boom", () => {
        throw new PermanentError("for good");
      });
    }, { retry: { maxAttempts: 3, initialBackoffMs: 10 } });
    const done = await waitFor(client, await run(name));
    assert.equal(done.status, "FAILED");
    assert.equal(runs, 1);
    assert.match(JSON.stringify(done.state.code), /for good/);
  });

  test("a diverging replay fails the workflow with a NonDeterminismError", async () => {
    let runs = 0;
    const name = serve(async (ctx) => {
      runs++;
      if (runs === 1) {
        await ctx.step("x", () => 1);
      } else {
        await ctx.sleep("x", 10); // another kind under a recorded name
      }
      await ctx.sleep("nap", 10);
      return "unreachable on replay";
    }, { retry: { maxAttempts: 3, initialBackoffMs: 10 } });
    const done = await waitFor(client, await run(name));
    assert.equal(done.status, "FAILED", JSON.stringify(done.state));
    assert.equal(runs, 2);
    const expected = new NonDeterminismError("x", "step", "sleep").message;
    assert.ok(String(done.state.code.error).includes(expected), done.state.code.error);
  });

  test("a step name outside [A-Za-z0-9._:-] fails the workflow before the step runs", async () => {
    let ran = false;
    const name = serve(async (ctx) => ctx.step("a b", () => (ran = true)), { retry: { maxAttempts: 3, initialBackoffMs: 10 } });
    const done = await waitFor(client, await run(name));
    assert.equal(done.status, "FAILED");
    assert.equal(ran, false);
    assert.match(String(done.state.code.error), /step name "a b" has " "/);
  });

  test("a step longer than the lease: heartbeats keep the run's lease, the step runs once", async () => {
    let calls = 0;
    const name = unique("wf");
    const w = new Worker(client, { name: unique("w"), waitSeconds: 1, leaseSeconds: 1, logger: quiet });
    w.workflow(name, async (ctx) => ctx.step("slow", async () => {
      calls++;
      await new Promise((r) => setTimeout(r, 1500));
      return "done";
    }));
    w.start();
    workers.push(w);
    const done = await waitFor(client, await run(name));
    assert.equal(done.status, "COMPLETED", JSON.stringify(done.state));
    assert.equal(done.output, "done");
    assert.equal(calls, 1);
  });

  test("the protocol: a step recorded twice keeps its first record", async () => {
    const handler = unique("manual");
    await client.putDefinition(handler, { name: handler, code: { handler } });
    const id = await run(handler);
    const task = await until(() => client.pollTask({ worker: "manual", handlers: [handler], waitSeconds: 1 }), "the run");
    assert.equal(task.kind, "workflow");
    assert.equal(task.workflowId, id);
    assert.deepEqual(task.journal ?? {}, {});
    const first = await client.checkpointStep(task.id, task.lease, "a", { output: 1, attempts: 1 });
    assert.deepEqual([first.status, first.output, first.seq], ["COMPLETED", 1, 1]);
    const again = await client.checkpointStep(task.id, task.lease, "a", { output: 2, attempts: 1 });
    assert.equal(again.output, 1);
    const failed = await client.checkpointStep(task.id, task.lease, "b", { error: "gone", attempts: 3 });
    assert.deepEqual([failed.status, failed.error, failed.attempts], ["FAILED", "gone", 3]);
    await assert.rejects(client.checkpointStep(task.id, "not-the-lease", "c", { output: 0, attempts: 1 }),
      (e) => e.status === 409);
    await client.completeTask(task.id, task.lease, "fine");
    assert.equal((await waitFor(client, id)).output, "fine");
  });

  test("ctx.set is visible in GET while the workflow waits", async () => {
    const name = serve(async (ctx, input) => {
      await ctx.set("stage", "waiting");
      await ctx.waitForEvent("go", "go", { key: input.key });
      await ctx.set("stage", "done");
      return "ok";
    });
    const key = unique("k");
    const id = await run(name, { key });
    await until(async () => (await client.getWorkflow(id)).state.variables?.stage === "waiting", "stage waiting");
    await publish(server.url, "go", key, null);
    const done = await waitFor(client, id);
    assert.equal(done.status, "COMPLETED");
    assert.equal(done.state.variables.stage, "done");
  });

  test("ctx.search sets search attributes a list finds, once per value", async () => {
    let bad;
    const name = serve(async (ctx, input) => {
      await ctx.search("customer", input.customer);
      await ctx.search("amount", 42);
      await ctx.sleep("nap", 100);
      await ctx.search("stage", "slept");
      try {
        await ctx.search("Bad", 1);
      } catch (e) {
        bad = e;
      }
      return "ok";
    });
    const id = await run(name, { customer: "acme" });
    const done = await waitFor(client, id);
    assert.equal(done.status, "COMPLETED");
    assert.deepEqual(done.search, { amount: 42, customer: "acme", stage: "slept" });
    assert.equal(bad?.status, 400);
    const history = await client.getHistory(id);
    assert.equal(history.filter((v) => v.cause.startsWith("search attribute")).length, 3);
  });

  test("a cancelled workflow's run gets CancelledError at its next checkpoint", async () => {
    let release;
    const gate = new Promise((r) => (release = r));
    let seen, started = false;
    const name = serve(async (ctx) => {
      try {
        await ctx.step("slow", () => ((started = true), gate));
      } catch (e) {
        seen = e;
        throw e;
      }
    });
    const id = await run(name);
    await until(() => started, "the step to start");
    const resp = await fetch(`${server.url}/v1/workflows/${id}/cancel`, { method: "POST" });
    assert.ok(resp.ok, await resp.text());
    release("late");
    await until(() => seen, "the CancelledError");
    assert.ok(seen instanceof CancelledError, String(seen));
    assert.equal((await client.getWorkflow(id)).status, "CANCELLED");
  });
});
