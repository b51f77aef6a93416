// Serves the code workflow "invoice" (the TypeScript twin of
// examples/code-sleep-event): it sends an invoice, sleeps, sends a reminder (by
// mail and SMS in parallel), then waits for the order's payment — an event
// "payment" published with the order id as its key — and sends a receipt.
// While it sleeps or waits it holds no worker: the run ends, and the server
// starts the next one (which replays the recorded steps) when the timer fires
// or the event comes.
//
//   flowd serve &
//   (cd clients/typescript && npm ci && node dist/examples/code-sleep-event.js) &
//   flowd start invoice --id inv-o-7 --input '{"order": "o-7", "amount": 4200, "remind_after": "10s"}'
//   flowd event payment --key o-7 --data '{"amount": 4200, "method": "card"}'
//   flowd get inv-o-7      # COMPLETED, output {"order": "o-7", "paid": 4200, …}
//
// A payment published while the workflow still sleeps is not lost: the wait
// that starts later takes it.

import { Client, Worker, type WorkflowContext } from "../src/index.js";

const env = (globalThis as { process?: { env: Record<string, string | undefined> } }).process?.env ?? {};

interface Invoice {
  order: string;
  amount: number; // in cents
  remind_after?: string; // how long to wait before the reminder, e.g. "10s" ("24h" when absent)
}

interface Payment {
  amount: number;
  method: string;
}

// invoice runs three times: from the start to the sleep, from the sleep to the
// wait for the payment, and from there to the end. Each run replays the steps
// recorded before it, whose functions do not run again.
async function invoice(ctx: WorkflowContext, inv: Invoice) {
  // ctx.now, not new Date(): recorded once, the same in every run.
  const invoicedAt = await ctx.now();

  await ctx.step("send-invoice", (s) => mail.send(s.idempotencyKey, inv.order, `invoice: ${inv.amount} cents`));

  await ctx.sleep("grace", inv.remind_after || "24h");

  // The reminder goes out by mail and by SMS at once: two steps awaited
  // together run in parallel, each recorded when it finishes.
  await Promise.all([
    ctx.step("remind-by-mail", (s) => mail.send(s.idempotencyKey, inv.order, "reminder: your invoice is due")),
    ctx.step("remind-by-sms", (s) => sms.send(s.idempotencyKey, inv.order, "reminder: your invoice is due")),
  ]);

  const payment = await ctx.waitForEvent<Payment>("payment", "payment", { key: inv.order });

  await ctx.step("send-receipt", (s) =>
    mail.send(s.idempotencyKey, inv.order, `receipt: ${payment.amount} cents by ${payment.method}`));
  return { order: inv.order, paid: payment.amount, method: payment.method, invoiced_at: invoicedAt.toISOString() };
}

// A mail or SMS service's client stand-in. send takes the step's idempotency
// key, the same for every attempt and run, so that a message sent again after
// a crash goes out once; here each call prints one line.
function messenger(channel: string) {
  return {
    send(key: string, order: string, text: string): boolean {
      console.log(`${channel} to the customer of ${order}: ${text} (key ${key})`);
      return true;
    },
  };
}
const mail = messenger("mail");
const sms = messenger("sms");

const client = new Client(env.FLOWD_SERVER ?? "http://127.0.0.1:8080", { token: env.FLOWD_TOKEN });
const worker = new Worker(client, { logger: console });
worker.workflow("invoice", invoice);
console.error(`serving workflow invoice on ${client.baseUrl}`);
await worker.run(); // until SIGTERM or SIGINT
