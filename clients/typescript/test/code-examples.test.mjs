// examples/code-saga.ts and examples/code-sleep-event.ts end to end against
// flowd serve, as examples/code_test.go runs the Go ones: every service call
// (a line ending "(key K)") happens once, however many runs a workflow took.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { test } from "node:test";
import { startServer, waitFor } from "./flowd-server.mjs";

const DIST = join(dirname(fileURLToPath(import.meta.url)), "..", "dist", "examples");

function example(t, server, file) {
  const proc = spawn(process.execPath, [join(DIST, file)], {
    env: { ...process.env, FLOWD_SERVER: server.url }, stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "", stderr = "";
  proc.stdout.on("data", (c) => (stdout += c));
  proc.stderr.on("data", (c) => (stderr += c));
  const exited = new Promise((resolve) => proc.once("exit", (code) => resolve(code)));
  t.after(() => proc.exitCode === null && proc.kill("SIGKILL"));
  return {
    async stop() {
      proc.kill("SIGTERM");
      assert.equal(await exited, 0, stderr);
      return stdout;
    },
    stderr: () => stderr,
  };
}

async function start(client, definition, id, input) {
  for (;;) {
    try {
      return await client.startWorkflow({ id, definition, input });
    } catch (e) {
      if (e.status !== 404) throw e; // the worker has not put the definition yet
      await new Promise((r) => setTimeout(r, 25));
    }
  }
}

function sideEffects(out) {
  const n = {};
  for (const m of out.matchAll(/\(key (\S+)\)$/gm)) n[m[1]] = (n[m[1]] ?? 0) + 1;
  return n;
}

function stepsInOrder(inst) {
  return Object.entries(inst.state.steps).sort((a, b) => a[1].seq - b[1].seq).map(([k, v]) => `${k} ${v.status}`);
}

async function publish(url, name, key, data) {
  const resp = await fetch(`${url}/v1/events`, {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ name, key, data }),
  });
  const text = await resp.text();
  assert.ok(resp.ok, text);
  return JSON.parse(text);
}

test("examples/code-saga.ts: shipped, and compensated in reverse order", async (t) => {
  const server = await startServer();
  t.after(() => server.close());
  const { client } = server;
  const ex = example(t, server, "code-saga.js");
  await start(client, "order-saga", "o-1", { id: "o-1", sku: "A-1", quantity: 2, amount: 4200, country: "PT" });
  await start(client, "order-saga", "o-2", { id: "o-2", sku: "A-1", quantity: 1, amount: 2100, country: "AQ" });
  const shipped = await waitFor(client, "o-1");
  const compensated = await waitFor(client, "o-2");
  const out = await ex.stop();

  assert.equal(shipped.status, "COMPLETED", ex.stderr());
  assert.deepEqual(shipped.output, {
    order: "o-1", status: "shipped", reservation: "res-o-1/reserve", charge: "ch-o-1/charge", shipment: "shp-o-1/ship",
  });
  assert.deepEqual(stepsInOrder(shipped), ["reserve COMPLETED", "charge COMPLETED", "ship COMPLETED"]);
  assert.equal(compensated.status, "COMPLETED", ex.stderr());
  assert.deepEqual(compensated.output, {
    order: "o-2", status: "compensated", reservation: "res-o-2/reserve", charge: "ch-o-2/charge",
    reason: "no carrier delivers to AQ",
  });
  assert.deepEqual(stepsInOrder(compensated),
    ["reserve COMPLETED", "charge COMPLETED", "ship FAILED", "refund COMPLETED", "release COMPLETED"]);
  assert.equal(compensated.state.steps.ship.attempts, 1);

  assert.deepEqual(sideEffects(out), {
    "o-1/reserve": 1, "o-1/charge": 1, "o-1/ship": 1,
    "o-2/reserve": 1, "o-2/charge": 1, "o-2/ship": 1, "o-2/refund": 1, "o-2/release": 1,
  });
  const refund = out.indexOf("refund ch-o-2/charge (key o-2/refund)\n");
  const release = out.indexOf("release res-o-2/reserve (key o-2/release)\n");
  assert.ok(refund >= 0 && release > refund, out);
});

test("examples/code-sleep-event.ts: sleep, parallel reminders, a payment before and after the wait", async (t) => {
  const server = await startServer();
  t.after(() => server.close());
  const { client } = server;
  const ex = example(t, server, "code-sleep-event.js");
  await start(client, "invoice", "inv-o-7", { order: "o-7", amount: 4200, remind_after: "300ms" });
  await start(client, "invoice", "inv-o-8", { order: "o-8", amount: 900, remind_after: "1s" });

  // o-8 pays while it still sleeps: nobody waits for the payment yet.
  await waitFor(client, "inv-o-8", ["RUNNING"]);
  for (;;) {
    const i = await client.getWorkflow("inv-o-8");
    if (i.state.steps?.grace?.status === "WAITING") break;
    await new Promise((r) => setTimeout(r, 25));
  }
  const early = await publish(server.url, "payment", "o-8", { amount: 900, method: "transfer" });
  assert.deepEqual(early.delivered ?? [], []);

  // o-7 sleeps, reminds, then waits; its payment completes the wait.
  let waiting;
  for (;;) {
    waiting = await client.getWorkflow("inv-o-7");
    if (waiting.state.steps?.payment?.status === "WAITING") break;
    await new Promise((r) => setTimeout(r, 25));
  }
  assert.deepEqual(stepsInOrder(waiting).map((s) => s.replace(/remind-by-(mail|sms)/, "remind-by-*")), [
    "flowd:now COMPLETED", "send-invoice COMPLETED", "grace COMPLETED", "remind-by-* COMPLETED",
    "remind-by-* COMPLETED", "payment WAITING",
  ]);
  const paid = await publish(server.url, "payment", "o-7", { amount: 4200, method: "card" });
  assert.deepEqual(paid.delivered, ["inv-o-7"]);

  const done = { "inv-o-7": await waitFor(client, "inv-o-7"), "inv-o-8": await waitFor(client, "inv-o-8") };
  const out = await ex.stop();
  for (const [id, want] of Object.entries({ "inv-o-7": [4200, "card"], "inv-o-8": [900, "transfer"] })) {
    const inst = done[id];
    assert.equal(inst.status, "COMPLETED", `${id}: ${JSON.stringify(inst.state.code)}\n${ex.stderr()}`);
    assert.deepEqual(inst.output, {
      order: id.slice(4), paid: want[0], method: want[1], invoiced_at: inst.state.steps["flowd:now"].output,
    });
    // Three runs: to the sleep, to the wait, to the end.
    assert.equal(inst.state.code.run, 3);
    assert.ok(!inst.state.code.waiting);
  }
  const calls = sideEffects(out);
  for (const order of ["o-7", "o-8"]) {
    for (const step of ["send-invoice", "remind-by-mail", "remind-by-sms", "send-receipt"]) {
      assert.equal(calls[`inv-${order}/${step}`], 1, `${order} ${step}\n${out}`);
    }
  }
  assert.equal(Object.keys(calls).length, 8, out);
});
