// The package as `npm install` delivers it: packed (dist/ built by the test
// run), installed into a temporary project, imported, and its types used by a
// strict TypeScript consumer. Its version is flowd's latest release.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { test } from "node:test";
import { REPO } from "./flowd-server.mjs";

const PKG = join(dirname(fileURLToPath(import.meta.url)), "..");
const npm = (args, cwd) => execFileSync("npm", [...args, "--no-audit", "--no-fund"], { cwd, encoding: "utf8", stdio: "pipe" });

test("the version is flowd's latest release in CHANGELOG.md", () => {
  const version = JSON.parse(readFileSync(join(PKG, "package.json"), "utf8")).version;
  const released = /^## (\d+\.\d+\.\d+)/m.exec(readFileSync(join(REPO, "CHANGELOG.md"), "utf8"));
  assert.ok(released, "no released version in CHANGELOG.md");
  assert.equal(version, released[1]);
});

test("npm install of the package: imports, and its types check in a strict consumer", (t) => {
  const tmp = mkdtempSync(join(tmpdir(), "flowd-ts-pkg-"));
  t.after(() => rmSync(tmp, { recursive: true, force: true }));
  npm(["pack", "--ignore-scripts", "--pack-destination", tmp], PKG);
  const tarball = readdirSync(tmp).find((f) => f.endsWith(".tgz"));
  assert.ok(tarball);
  const project = join(tmp, "project");
  execFileSync("mkdir", [project]);
  writeFileSync(join(project, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module" }));
  npm(["install", "--offline", join(tmp, tarball)], project);

  const out = execFileSync(process.execPath, ["--input-type=module", "-e", `
    import * as f from "flowd-client";
    const names = ["Client", "Worker", "WorkflowContext", "StepFailedError", "TimeoutError", "CancelledError",
      "NonDeterminismError", "PermanentError"];
    console.log(names.filter((n) => typeof f[n] !== "function").join(",") || "ok");
  `], { cwd: project, encoding: "utf8" });
  assert.equal(out.trim(), "ok");

  writeFileSync(join(project, "main.ts"), `
import { Client, StepFailedError, Worker, type WorkflowContext } from "flowd-client";
const worker = new Worker(new Client("http://127.0.0.1:8080"));
worker.workflow("order", async (ctx: WorkflowContext, input: { id: string }) => {
  const charge: string = await ctx.step("charge", (s) => "ch_" + s.idempotencyKey, { retry: { maxAttempts: 2 } });
  const [a, b] = await Promise.all([ctx.step("a", async () => 1), ctx.step("b", async () => "two")]);
  await ctx.sleep("nap", "10s");
  const paid = await ctx.waitForEvent<{ amount: number }>("paid", "payment", { key: input.id, timeout: 60_000 });
  const child = await ctx.child<number>("kid", "invoice", { id: input.id });
  await ctx.set("stage", "done");
  const now: Date = await ctx.now();
  try {
    await ctx.step("ship", () => { throw new Error("no"); });
  } catch (e) {
    if (!(e instanceof StepFailedError)) throw e;
  }
  return { charge, a: a + 1, b: b.length, amount: paid.amount, child, now: now.getTime(), r: await ctx.random(), u: await ctx.uuid() };
});
`);
  writeFileSync(join(project, "tsconfig.json"), JSON.stringify({
    compilerOptions: { target: "ES2022", module: "NodeNext", moduleResolution: "NodeNext", strict: true, noEmit: true, lib: ["ES2022", "DOM"] },
    files: ["main.ts"],
  }));
  execFileSync(process.execPath, [join(PKG, "node_modules", "typescript", "bin", "tsc"), "-p", project], { encoding: "utf8" });
});
