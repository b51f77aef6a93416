// A real `flowd serve` for the tests, on a free port: a temporary SQLite
// database, or, when FLOWD_TEST_POSTGRES_URL names a PostgreSQL server (its
// user may create databases), a new database of its own there.
// FLOWD_BIN names the flowd binary (scripts/test-clients builds it once);
// without it the binary is built from this repository with `go build`.

import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "../dist/src/index.js";

export const REPO = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");

/** Starts flowd serve with a short sweep interval, so that expired leases are noticed within 0.1 s. */
export async function startServer() {
  const tmp = mkdtempSync(join(tmpdir(), "flowd-ts-"));
  let bin = process.env.FLOWD_BIN;
  if (!bin) {
    bin = join(tmp, "flowd");
    execFileSync("go", ["build", "-o", bin, "./cmd/flowd"], { cwd: REPO, stdio: "inherit" });
  }
  const db = process.env.FLOWD_TEST_POSTGRES_URL ? newPostgresDatabase(process.env.FLOWD_TEST_POSTGRES_URL) : `sqlite:${join(tmp, "flowd.db")}`;
  let { proc, url } = await launch(bin, "127.0.0.1:0", db);
  const stop = async () => {
    if (proc.exitCode === null && proc.signalCode === null) {
      const exited = new Promise((resolve) => proc.once("exit", resolve));
      proc.kill("SIGTERM");
      await exited;
    }
  };
  return {
    url,
    client: new Client(url),
    /** Stops the server and starts it again on the same address and database. */
    async restart() {
      await stop();
      ({ proc } = await launch(bin, new URL(url).host, db));
    },
    async close() {
      await stop();
      rmSync(tmp, { recursive: true, force: true });
    },
  };
}

let databases = 0;

/** Creates a database on the PostgreSQL server of url (with psql) and returns its URL. */
function newPostgresDatabase(url) {
  const name = `flowd_ts_${process.pid}_${++databases}`;
  execFileSync("psql", ["-X", "-q", "-v", "ON_ERROR_STOP=1", "-c", `CREATE DATABASE ${name}`, url], { stdio: "inherit" });
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

async function launch(bin, addr, db) {
  const proc = spawn(bin, ["serve", "--addr", addr, "--db", db,
    "--sweep-interval", "100ms", "--log-level", "warn"], { stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`flowd serve did not start:\n${output}`)), 30_000);
    const onData = (chunk) => {
      output += chunk;
      const m = /flowd is serving the API at (\S+)\/v1/.exec(output);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    };
    proc.stdout.on("data", onData);
    proc.stderr.on("data", onData);
    proc.on("exit", (code) => reject(new Error(`flowd serve exited with ${code}:\n${output}`)));
  });
  return { proc, url };
}

const FINAL = ["COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT"];

/** Reads the instance until its status is final (or one of statuses); throws after timeoutMs. */
export async function waitFor(client, id, statuses = FINAL, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const inst = await client.getWorkflow(id);
    if (statuses.includes(inst.status)) return inst;
    if (Date.now() > deadline) {
      throw new Error(`workflow ${id} still ${inst.status} after ${timeoutMs} ms: ${JSON.stringify(inst.state)}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

export function unique(prefix) {
  return `${prefix}-${Math.random().toString(16).slice(2, 10)}`;
}
