import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { test } from "node:test";
import { REPO, startServer, waitFor } from "./flowd-server.mjs";

const EXAMPLE = join(dirname(fileURLToPath(import.meta.url)), "..", "dist", "examples", "greet-worker.js");

test("the greet example completes the hello workflow and stops on SIGTERM", async (t) => {
  const server = await startServer();
  t.after(() => server.close());
  const { client } = server;
  await client.putDefinition("hello", readFileSync(join(REPO, "examples", "hello", "hello.yaml"), "utf8"));

  const proc = spawn(process.execPath, [EXAMPLE], {
    env: { ...process.env, FLOWD_SERVER: server.url }, stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  proc.stdout.on("data", (c) => (output += c));
  proc.stderr.on("data", (c) => (output += c));
  const exited = new Promise((resolve) => proc.once("exit", (code) => resolve(code)));
  t.after(() => proc.exitCode === null && proc.kill("SIGKILL"));

  const inst = await client.startWorkflow({ definition: "hello", input: { name: "Ada" } });
  const done = await waitFor(client, inst.id);
  assert.equal(done.status, "COMPLETED", output);
  assert.deepEqual(done.state.steps.greet.output, { greeting: "Hello, Ada!", attempt: 1 });

  const failed = await waitFor(client, (await client.startWorkflow({ definition: "hello", input: { name: "" } })).id);
  assert.equal(failed.status, "FAILED");
  assert.match(failed.state.steps.greet.error, /input.name is required/);

  proc.kill("SIGTERM");
  assert.equal(await exited, 0, output);
  assert.match(output, /stopped/);
});
