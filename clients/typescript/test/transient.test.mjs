// The worker against a stub server that fails now and then: what a real
// flowd serve cannot be made to do on demand.

import assert from "node:assert/strict";
import { createServer } from "node:http";
import { test } from "node:test";
import { Client, Worker } from "../dist/src/index.js";

const TASK = {
  task_id: "t1", lease: "l1", lease_until: "2999-01-01T00:00:00Z", workflow_id: "w1", step: "a", handler: "h",
  attempt: 1, input: { n: 1 }, idempotency_key: "w1/a",
};

test("polls and reports are retried after 5xx", async (t) => {
  // Poll: 503 twice, then the task, then 204. Complete: 502 once, then 200.
  const calls = [];
  const server = createServer((req, res) => {
    let data = "";
    req.on("data", (c) => (data += c));
    req.on("end", () => {
      calls.push([req.url, JSON.parse(data)]);
      const n = calls.filter(([p]) => p === req.url).length;
      const reply = (status, body) => {
        res.writeHead(status, { "Content-Type": "application/json" });
        res.end(body === null ? "" : JSON.stringify(body));
      };
      if (req.url === "/v1/tasks/poll") {
        if (n <= 2) return reply(503, { error: "Service Unavailable", message: "database unreachable" });
        return n === 3 ? reply(200, TASK) : reply(204, null);
      }
      if (req.url === "/v1/tasks/t1/complete") {
        return n === 1 ? reply(502, { error: "Bad Gateway", message: "proxy hiccup" })
          : reply(200, { task_id: "t1", status: "completed" });
      }
      reply(404, { error: "Not Found", message: req.url });
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  t.after(() => new Promise((r) => server.close(r)));

  const ran = [];
  const quiet = { info() {}, warn() {}, error() {} };
  const w = new Worker(new Client(`http://127.0.0.1:${server.address().port}`),
    { concurrency: 1, waitSeconds: 1, logger: quiet });
  w.handle("h", (task) => {
    ran.push(task.input);
    return { doubled: task.input.n * 2 };
  });
  w.start();
  t.after(() => w.stop(0));
  const completes = () => calls.filter(([p]) => p === "/v1/tasks/t1/complete").map(([, b]) => b);
  for (let i = 0; i < 200 && completes().length < 2; i++) await new Promise((r) => setTimeout(r, 50));
  assert.equal(await w.stop(5000), true);
  assert.deepEqual(ran, [{ n: 1 }], "the task ran once");
  assert.deepEqual(completes(), [{ lease: "l1", output: { doubled: 2 } }, { lease: "l1", output: { doubled: 2 } }]);
  assert.ok(calls.filter(([p]) => p === "/v1/tasks/poll").length >= 3);
  assert.equal(w.error, undefined);
});
