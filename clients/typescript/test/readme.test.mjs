// The README's workflow runs as written: its first TypeScript block,
// compiled against this package (linked as flowd-client, as `npm install
// ./clients/typescript` links it) with only the server's URL replaced,
// serves "order" until a started order, paid, is shipped.
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { startServer, waitFor } from "./flowd-server.mjs";

const PKG = join(dirname(fileURLToPath(import.meta.url)), "..");

test("the README's workflow runs as written", async (t) => {
  const readme = readFileSync(join(PKG, "README.md"), "utf8");
  const block = /```ts\n([\s\S]*?)\n```/.exec(readme);
  assert.ok(block, "no ```ts block in README.md");
  assert.ok(block[1].includes('"http://127.0.0.1:8080"'), "the README's workflow no longer names the default server");

  const server = await startServer();
  t.after(() => server.close());
  const dir = mkdtempSync(join(tmpdir(), "flowd-readme-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  mkdirSync(join(dir, "node_modules"));
  symlinkSync(PKG, join(dir, "node_modules", "flowd-client"), "dir");
  writeFileSync(join(dir, "package.json"), JSON.stringify({ type: "module" }));
  writeFileSync(join(dir, "order.ts"), block[1].replace('"http://127.0.0.1:8080"', JSON.stringify(server.url)));
  execFileSync(process.execPath, [join(PKG, "node_modules", "typescript", "bin", "tsc"), "--strict", "--target", "ES2022",
    "--module", "NodeNext", "--moduleResolution", "NodeNext", "--skipLibCheck", "order.ts"], { cwd: dir, stdio: "inherit" });

  const worker = spawn(process.execPath, [join(dir, "order.js")], { cwd: dir, stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  worker.stdout.on("data", (c) => (output += c));
  worker.stderr.on("data", (c) => (output += c));
  t.after(() => worker.exitCode === null && worker.kill("SIGKILL"));

  // The worker puts the definition when it starts.
  for (let i = 0; ; i++) {
    try {
      await server.client.startWorkflow({ definition: "order", id: "o-1", input: { id: "o-1", amount: 4200 } });
      break;
    } catch (e) {
      if (i > 100) throw new Error(`could not start order: ${e}\n${output}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  // Published before the wait begins: it is kept for the wait.
  const resp = await fetch(`${server.url}/v1/events`, {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ name: "payment", key: "o-1", data: { ok: true } }),
  });
  assert.ok(resp.ok, await resp.text());
  const done = await waitFor(server.client, "o-1", ["COMPLETED", "FAILED"], 40_000);
  assert.equal(done.status, "COMPLETED", `${JSON.stringify(done.state)}\n${output}`);
  assert.deepEqual(done.output, { status: "shipped", charge: "ch_4200_o-1/charge", paid: true });
});
