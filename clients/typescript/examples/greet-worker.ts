// Serves the handler `greet` of examples/hello/hello.yaml until SIGTERM or SIGINT.
//
//   flowd serve &
//   flowd def apply examples/hello/hello.yaml
//   (cd clients/typescript && npm ci && npx tsc -p . && node dist/examples/greet-worker.js) &
//   flowd start hello --input '{"name": "Ada"}'

import { Client, PermanentError, Worker } from "../src/index.js";

const env = (globalThis as { process?: { env: Record<string, string | undefined> } }).process?.env ?? {};

const client = new Client(env.FLOWD_SERVER ?? "http://127.0.0.1:8080", { token: env.FLOWD_TOKEN });
const worker = new Worker(client, { concurrency: 4, logger: console });

worker.handle("greet", (task) => {
  const name = (task.input as { name?: string } | null)?.name;
  if (!name) throw new PermanentError("input.name is required"); // retrying will not help
  return { greeting: `Hello, ${name}!`, attempt: task.attempt };
});

await worker.run(); // resolves once the tasks in flight have finished
