// The worker process SIGKILLed between a step's effect and its checkpoint, and
// after it: the step runs again in the first case (its checkpoint recorded
// once), not in the second.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, describe, test } from "node:test";
import { startServer, unique, waitFor } from "./flowd-server.mjs";

const FIXTURE = join(dirname(fileURLToPath(import.meta.url)), "fixtures", "crash-worker.mjs");

describe("a code workflow's worker SIGKILLed", () => {
  let server, client, dir;
  const procs = [];
  before(async () => {
    server = await startServer();
    client = server.client;
    dir = mkdtempSync(join(tmpdir(), "flowd-ts-crash-"));
  });
  after(async () => {
    for (const p of procs) if (p.exitCode === null && p.signalCode === null) p.kill("SIGKILL");
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  function worker(env) {
    const p = spawn(process.execPath, [FIXTURE], {
      env: { ...process.env, FLOWD_SERVER: server.url, ...env }, stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    p.stdout.on("data", (c) => (output += c));
    p.stderr.on("data", (c) => (output += c));
    const exited = new Promise((resolve) => p.once("exit", (code, signal) => resolve({ code, signal, output })));
    procs.push(p);
    return { p, exited, output: () => output };
  }

  for (const crash of ["between", "after"]) {
    test(`${crash} step a's effect and its checkpoint`, async () => {
      const workflow = unique(`crash-${crash}`);
      const env = { WORKFLOW: workflow, EFFECTS: join(dir, `${workflow}.effects`), MARKER: join(dir, `${workflow}.marker`), CRASH: crash };
      const first = worker(env);
      const id = unique("i");
      for (;;) {
        try {
          await client.startWorkflow({ id, definition: workflow });
          break;
        } catch (e) {
          if (e.status !== 404) throw e;
          await new Promise((r) => setTimeout(r, 25));
        }
      }
      const died = await first.exited;
      assert.equal(died.signal, "SIGKILL", died.output);

      const second = worker(env);
      const done = await waitFor(client, id);
      second.p.kill("SIGTERM");
      assert.equal((await second.exited).code, 0, second.output());
      assert.equal(done.status, "COMPLETED", JSON.stringify(done.state));

      const effects = readFileSync(env.EFFECTS, "utf8").trim().split("\n");
      const a = `a ${id}/a`, b = `b ${id}/b`;
      // between: "a" ran twice (its first effect was not checkpointed); after: once.
      assert.deepEqual(effects, crash === "between" ? [a, a, b] : [a, b]);
      const steps = done.state.steps;
      assert.deepEqual([steps.a.status, steps.a.attempts, steps.a.seq], ["COMPLETED", 1, 1]);
      assert.deepEqual([steps.b.status, steps.b.seq], ["COMPLETED", 2]);
      // The checkpoint of "a" is recorded by the run that got there, once.
      const causes = (await client.getHistory(id)).map((v) => v.cause);
      assert.equal(causes.filter((c) => c === 'step "a" completed').length, 1, causes.join("\n"));
      assert.equal(causes.filter((c) => c === 'step "b" completed').length, 1, causes.join("\n"));
      const pidOfA = /pid (\d+)/.exec(done.output.a)[1];
      assert.equal(Number(pidOfA) === first.p.pid, crash === "after", done.output.a);
    });
  }
});
