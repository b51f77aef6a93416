// Serves the code workflow "order-saga" (the TypeScript twin of
// examples/code-saga): an order is a function whose steps — reserve the stock,
// charge the card, ship — are recorded on the server as they finish. When
// shipping fails for good, the steps done so far are undone in reverse order
// (refund, then release the stock) and the workflow completes "compensated".
//
//   flowd serve &
//   (cd clients/typescript && npm ci && node dist/examples/code-saga.js) &   # FLOWD_SERVER, FLOWD_TOKEN
//   flowd start order-saga --input '{"id": "o-1", "sku": "A-1", "quantity": 2, "amount": 4200, "country": "PT"}'
//   flowd start order-saga --input '{"id": "o-2", "sku": "A-1", "quantity": 1, "amount": 2100, "country": "AQ"}'
//   flowd get <id>     # o-1: "shipped"; o-2: "compensated" (no carrier delivers to AQ)
//
// The services are stand-ins that print one line a call, with the call's
// idempotency key: each line shows a side effect, and each appears once.

import { Client, PermanentError, StepFailedError, Worker, type WorkflowContext } from "../src/index.js";

const env = (globalThis as { process?: { env: Record<string, string | undefined> } }).process?.env ?? {};

interface Order {
  id: string;
  sku: string;
  quantity: number;
  amount: number; // in cents
  country: string;
}

interface Result {
  order: string;
  status: "shipped" | "compensated";
  reservation: string;
  charge: string;
  shipment?: string;
  reason?: string; // why it was compensated
}

// orderSaga reserves, charges and ships. Each forward step that succeeds pushes
// the step that undoes it; when a later step fails for good, the undo steps run
// in reverse order and the order ends "compensated": a business outcome, so the
// workflow COMPLETES with it rather than failing.
async function orderSaga(ctx: WorkflowContext, o: Order): Promise<Result> {
  const res: Partial<Result> & { order: string } = { order: o.id };
  const undo: (() => Promise<unknown>)[] = [];
  try {
    // A step that fails for good here has nothing to undo: the workflow fails.
    const reservation = await ctx.step("reserve", (s) => stock.reserve(s.idempotencyKey, o.sku, o.quantity));
    res.reservation = reservation;
    undo.push(() => ctx.step("release", (s) => stock.release(s.idempotencyKey, reservation), { retry: { maxAttempts: 10 } }));

    const charge = await ctx.step("charge", (s) => payments.charge(s.idempotencyKey, o.amount));
    res.charge = charge;
    undo.push(() => ctx.step("refund", (s) => payments.refund(s.idempotencyKey, charge), { retry: { maxAttempts: 10 } }));

    res.shipment = await ctx.step("ship", (s) => carrier.ship(s.idempotencyKey, o.country, reservation),
      { retry: { maxAttempts: 3, initialBackoffMs: 200 } });
    return { ...res, status: "shipped" } as Result;
  } catch (e) {
    if (!(e instanceof StepFailedError) || undo.length === 0) throw e;
    for (const step of undo.reverse()) {
      try {
        await step();
      } catch (err) {
        // A compensation that fails for good needs a person: the workflow fails, saying which.
        throw new PermanentError(`${e.step} failed and compensating it failed too: ${(err as Error).message}`);
      }
    }
    return { ...res, status: "compensated", reason: e.detail } as Result;
  }
}

// The services below stand for real clients (a stock API, a payment provider,
// a carrier). Each takes the step's idempotency key, the same for every attempt
// and every run, so that a call made again after a crash does the work once.
const stock = {
  reserve(key: string, sku: string, quantity: number): string {
    if (!(quantity > 0)) throw new PermanentError(`quantity must be positive, got ${quantity}`);
    console.log(`reserve ${quantity} x ${sku} (key ${key})`);
    return `res-${key}`;
  },
  release(key: string, reservation: string): boolean {
    console.log(`release ${reservation} (key ${key})`);
    return true;
  },
};

const payments = {
  charge(key: string, amount: number): string {
    if (!(amount > 0)) throw new PermanentError(`amount must be positive, got ${amount}`);
    console.log(`charge ${amount} (key ${key})`);
    return `ch-${key}`;
  },
  refund(key: string, charge: string): boolean {
    console.log(`refund ${charge} (key ${key})`);
    return true;
  },
};

const carrier = {
  ship(key: string, country: string, reservation: string): string {
    console.log(`ship ${reservation} to ${country} (key ${key})`);
    // No retry mends this: the step fails for good at once.
    if (country === "AQ") throw new PermanentError(`no carrier delivers to ${country}`);
    return `shp-${key}`;
  },
};

const client = new Client(env.FLOWD_SERVER ?? "http://127.0.0.1:8080", { token: env.FLOWD_TOKEN });
const worker = new Worker(client, { logger: console });
worker.workflow("order-saga", orderSaga, {
  timeout: "1h",
  // Runs of the function that fail (not its steps: each has its own retry) are run again up to 5 times.
  retry: { maxAttempts: 5 },
});
console.error(`serving workflow order-saga on ${client.baseUrl}`);
await worker.run(); // until SIGTERM or SIGINT
