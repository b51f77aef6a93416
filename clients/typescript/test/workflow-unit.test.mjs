// The workflow runner against a fake server: what it sends, in which order.
import assert from "node:assert/strict";
import { test } from "node:test";
import { ConflictError } from "../dist/src/index.js";
import { runWorkflow } from "../dist/src/workflow.js";

function fake(journal = {}, delayMs = 5) {
  const sent = [];
  let seq = Object.keys(journal).length;
  const client = {
    async checkpointStep(_task, _lease, name, o) {
      sent.push(["step", name, o]);
      await new Promise((r) => setTimeout(r, delayMs));
      return "error" in o ? { status: "FAILED", error: o.error, attempts: o.attempts, kind: "step", seq: ++seq }
        : { status: "COMPLETED", output: o.output, attempts: o.attempts, kind: "step", seq: ++seq };
    },
    async suspendTask(_task, _lease, waits) {
      sent.push(["suspend", waits]);
    },
    async setVariable(_task, _lease, key, value) {
      sent.push(["set", key, value]);
    },
  };
  const task = { id: "t1", lease: "l1", workflowId: "wf", attempt: 1, input: { n: 1 }, journal, signal: new AbortController().signal };
  return { client, task, sent, run: (fn) => runWorkflow(task, fn, client, (call) => call()) };
}

test("random() draws 53 bits in [0, 1)", async () => {
  const f = fake({}, 0);
  const out = await f.run(async (ctx) => {
    const rs = [];
    for (let i = 0; i < 500; i++) rs.push(await ctx.random());
    return rs;
  });
  assert.equal(out.kind, "complete");
  assert.ok(out.output.every((r) => r >= 0 && r < 1));
  assert.ok(Math.max(...out.output) > 0.9);
  assert.equal(f.sent[1][1], "flowd:random#2");
});

test("waits started together, after the steps in flight, are one suspend", async () => {
  const f = fake();
  const out = await f.run(async (ctx) => {
    const slow = ctx.step("slow", async () => {
      await new Promise((r) => setTimeout(r, 30));
      return 1;
    });
    await Promise.all([ctx.sleep("a", 1000), ctx.waitForEvent("b", "ev", { key: "k", timeout: "1m" }),
      ctx.child("c", "def", { x: 1 }), slow]);
    return "unreachable";
  });
  assert.equal(out.kind, "ended");
  assert.deepEqual(f.sent.map((s) => s[0]), ["step", "suspend"]);
  assert.deepEqual(f.sent[1][1], {
    a: { sleep: "1000ms" }, b: { event: "ev", key: "k", timeout: "1m" }, c: { child: { definition: "def", input: { x: 1 } } },
  });
});

test("a replay returns recorded entries without running them; another kind is non-determinism", async () => {
  const journal = {
    a: { status: "COMPLETED", output: "A", kind: "step", seq: 1 },
    nap: { status: "COMPLETED", output: null, kind: "sleep", seq: 2 },
    paid: { status: "FAILED", error: { type: "timeout", message: "no event within 1m" }, kind: "event", seq: 3 },
  };
  const f = fake(journal);
  let ran = false;
  const out = await f.run(async (ctx) => {
    const a = await ctx.step("a", () => (ran = true));
    await ctx.sleep("nap", 5);
    let timedOut;
    try {
      await ctx.waitForEvent("paid", "payment");
    } catch (e) {
      timedOut = e.constructor.name;
    }
    return { a, timedOut };
  });
  assert.deepEqual(out, { kind: "complete", output: { a: "A", timedOut: "TimeoutError" } });
  assert.equal(ran, false);
  assert.deepEqual(f.sent, []);

  const g = fake(journal);
  const bad = await g.run(async (ctx) => {
    await ctx.sleep("a", 5);
  });
  assert.equal(bad.kind, "fail");
  assert.equal(bad.retryable, false);
  assert.match(bad.error, /non-determinism: step "a" was recorded as a step, and the code now asks for a sleep/);
});

test("a lost lease at a checkpoint ends the run; the code gets CancelledError", async () => {
  const f = fake();
  f.client.checkpointStep = async () => {
    throw Object.assign(new ConflictError(409, "Conflict", "lease lost"));
  };
  let seen;
  const out = await f.run(async (ctx) => {
    try {
      await ctx.step("a", () => 1);
    } catch (e) {
      seen = e.constructor.name;
    }
    await ctx.step("b", () => 2); // after the end: never settles
    return "unreachable";
  });
  assert.equal(out.kind, "ended");
  assert.equal(seen, "CancelledError");
});

test("a function that returns with steps in flight waits for them to be recorded", async () => {
  const f = fake();
  const out = await f.run(async (ctx) => {
    void ctx.step("fire-and-forget", async () => {
      await new Promise((r) => setTimeout(r, 20));
      throw new Error("never awaited, never unhandled");
    }, { retry: { maxAttempts: 1 } });
    return "done";
  });
  assert.deepEqual(out, { kind: "complete", output: "done" });
  assert.deepEqual(f.sent.map((s) => [s[1], s[2].error]), [["fire-and-forget", "never awaited, never unhandled"]]);
});
