// A code workflow's sleep across a restart of the server: the timer is not lost.
import assert from "node:assert/strict";
import { test } from "node:test";
import { Worker } from "../dist/src/index.js";
import { startServer, unique, waitFor } from "./flowd-server.mjs";

test("a sleep across a server restart", async (t) => {
  const server = await startServer();
  t.after(() => server.close());
  const { client } = server;
  const name = unique("sleepy");
  const calls = { a: 0, b: 0 };
  const worker = new Worker(client, { waitSeconds: 1, logger: { info() {}, warn() {}, error() {} } });
  worker.workflow(name, async (ctx) => {
    await ctx.step("a", () => ++calls.a);
    await ctx.sleep("nap", "1500ms");
    await ctx.step("b", () => ++calls.b);
    return "woke";
  });
  worker.start();
  t.after(() => worker.stop(0));

  const id = unique("i");
  for (;;) {
    try {
      await client.startWorkflow({ id, definition: name });
      break;
    } catch (e) {
      if (e.status !== 404) throw e;
      await new Promise((r) => setTimeout(r, 25));
    }
  }
  const waiting = await waitFor(client, id, ["RUNNING"]);
  for (let i = 0; waiting.state.steps?.nap?.status !== "WAITING"; i++) {
    assert.ok(i < 400, "the sleep never began");
    await new Promise((r) => setTimeout(r, 25));
    Object.assign(waiting, await client.getWorkflow(id));
  }
  await server.restart();
  const done = await waitFor(client, id);
  assert.equal(done.status, "COMPLETED", JSON.stringify(done.state));
  assert.equal(done.output, "woke");
  assert.deepEqual(calls, { a: 1, b: 1 });
  assert.equal(done.state.steps.nap.status, "COMPLETED");
  assert.ok(Date.parse(done.state.steps.nap.until) > 0);
});
