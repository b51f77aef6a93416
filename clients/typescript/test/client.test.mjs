import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  BadRequestError, Client, ConflictError, NotFoundError, PreconditionFailedError, TransportError,
} from "../dist/src/index.js";
import { startServer, unique } from "./flowd-server.mjs";

describe("Client against flowd serve", () => {
  let server, client;
  before(async () => {
    server = await startServer();
    client = server.client;
  });
  after(() => server.close());

  test("start, get and patch with If-Match; a stale version is a typed conflict", async () => {
    const inst = await client.startWorkflow({ id: unique("free"), state: { n: 1 } });
    assert.equal(inst.created, true);
    assert.equal(inst.version, 0);

    const got = await client.getWorkflow(inst.id);
    assert.deepEqual([got.id, got.version, got.state.n], [inst.id, 0, 1]);

    const patched = await client.patchWorkflow(inst.id, { n: 2 }, got.version);
    assert.deepEqual([patched.version, patched.state.n], [1, 2]);

    const err = await client.patchWorkflow(inst.id, { n: 3 }, got.version).catch((e) => e);
    assert.ok(err instanceof PreconditionFailedError, String(err));
    assert.ok(err instanceof ConflictError);
    assert.equal(err.status, 412);
    assert.equal(err.currentVersion, 1);
    assert.equal(err.current.state.n, 2);
    assert.equal((await client.getWorkflow(inst.id)).state.n, 2, "a refused patch wrote nothing");

    const anyway = await client.patchWorkflow(inst.id, { n: 4 }, "*");
    assert.deepEqual([anyway.version, anyway.state.n], [2, 4]);
  });

  test("listWorkflows filters and pages; iterWorkflows reads every page", async () => {
    const tag = unique("list");
    const ids = [];
    for (let i = 0; i < 3; i++) {
      ids.push((await client.startWorkflow({ id: `${tag}-${i}`, search: { batch: tag, n: i } })).id);
    }
    await client.startWorkflow({ id: unique("other"), search: { batch: "other" } });

    const first = await client.listWorkflows({ search: { batch: tag }, limit: 2 });
    assert.deepEqual(first.workflows.map((w) => w.id), [ids[2], ids[1]], "newest first");
    assert.ok(first.nextCursor);
    assert.deepEqual(first.workflows[0].search, { batch: tag, n: 2 });
    const rest = await client.listWorkflows({ search: { batch: tag }, limit: 2, cursor: first.nextCursor });
    assert.deepEqual([rest.workflows.map((w) => w.id), rest.nextCursor], [[ids[0]], undefined]);

    const both = await client.listWorkflows({ search: { batch: tag, n: 1 } });
    assert.deepEqual(both.workflows.map((w) => w.id), [ids[1]], "attributes are ANDed; a number as written");
    const all = [];
    for await (const w of client.iterWorkflows({ idPrefix: `${tag}-`, limit: 1 })) all.push(w.id);
    assert.deepEqual(all, [...ids].reverse());

    const bad = await client.listWorkflows({ limit: 0 }).catch((e) => e);
    assert.ok(bad instanceof BadRequestError, String(bad));
    assert.equal(bad.status, 400);
    assert.match(bad.message, /limit/);
  });

  test("updateWorkflow reads again after a lost race", async () => {
    const inst = await client.startWorkflow({ id: unique("race"), state: { n: 0 } });
    const seen = [];
    const out = await client.updateWorkflow(inst.id, async (current) => {
      seen.push(current.version);
      if (seen.length === 1) {
        // Another writer gets in between this read and its patch.
        await client.patchWorkflow(inst.id, { n: current.state.n + 10 }, "*");
      }
      return { n: current.state.n + 1 };
    });
    assert.equal(out.state.n, 11);
    assert.deepEqual(seen, [0, 1]);

    const unchanged = await client.updateWorkflow(inst.id, () => undefined);
    assert.equal(unchanged.version, out.version, "merge returning undefined changes nothing");
  });

  test("an idempotency key creates the instance once", async () => {
    const key = unique("key");
    const first = await client.startWorkflow({ state: { a: 1 }, idempotencyKey: key });
    const again = await client.startWorkflow({ state: { a: 1 }, idempotencyKey: key });
    assert.equal(first.created, true);
    assert.equal(again.created, false);
    assert.equal(again.id, first.id);
  });

  test("complete a wait step with If-Match", async () => {
    const name = unique("approval");
    await client.putDefinition(name, { name, steps: [{ id: "approve", type: "wait" }] });
    const inst = await client.startWorkflow({ definition: name, id: unique("wf") });
    const current = await client.getWorkflow(inst.id);
    await client.patchWorkflow(inst.id, { note: "moved on" }, current.version);

    const stale = await client.completeStep(inst.id, "approve", { ok: true }, current.version).catch((e) => e);
    assert.ok(stale instanceof PreconditionFailedError, String(stale));
    assert.equal(stale.currentVersion, current.version + 1);

    const done = await client.completeStep(inst.id, "approve", { ok: true }, stale.currentVersion);
    assert.equal(done.state.steps.approve.status, "COMPLETED");
    assert.deepEqual(done.state.steps.approve.output, { ok: true });

    const twice = await client.completeStep(inst.id, "approve", { ok: false }, "*").catch((e) => e);
    assert.ok(twice instanceof ConflictError, String(twice));
    assert.ok(!(twice instanceof PreconditionFailedError));
    assert.equal(twice.status, 409);
    assert.equal(twice.currentVersion, (await client.getWorkflow(inst.id)).version);
  });

  test("errors by status", async () => {
    const missing = await client.getWorkflow(unique("missing")).catch((e) => e);
    assert.ok(missing instanceof NotFoundError, String(missing));
    assert.equal(missing.status, 404);
    assert.match(missing.detail, /not found/);

    await assert.rejects(client.startWorkflow({ definition: unique("no-such-definition") }), NotFoundError);
    await assert.rejects(client.completeStep(unique("missing"), "s", null, "*"), NotFoundError);

    const name = unique("bad");
    const bad = await client.putDefinition(name, { name, steps: [{ id: "a", type: "nonsense" }] }).catch((e) => e);
    assert.ok(bad instanceof BadRequestError, String(bad));
    assert.ok(bad.problems.length > 0, "a refused definition lists its problems");

    const taken = await client.startWorkflow({ id: unique("taken") });
    const dup = await client.startWorkflow({ id: taken.id }).catch((e) => e);
    assert.ok(dup instanceof ConflictError, String(dup));
    assert.equal(dup.status, 409);

    await assert.rejects(client.patchWorkflow(taken.id, {}, null), TypeError);
  });

  test("an unreachable server is a TransportError", async () => {
    await assert.rejects(new Client("http://127.0.0.1:9", { timeoutMs: 5000 }).getWorkflow("x"), TransportError);
  });

  test("a bad base URL is refused", () => {
    for (const url of ["ftp://host", "localhost", "http://user:pw@host", "http://host/?q=1"]) {
      assert.throws(() => new Client(url), TypeError, url);
    }
  });
});
