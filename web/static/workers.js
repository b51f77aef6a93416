// Warnings on the workflow page for RUNNING task steps that nothing will run:
// no worker — a remote one or a node's in-process pool — has polled for the
// step's handler in the last 60 seconds (GET /v1/workers). Such a step stays
// RUNNING until a worker for its handler appears, so the page says how to
// start one.
//
// Self-contained: the workflow page gives it a box and a way to read the
// instance and its definition, and calls update() when they change.

import { api } from './api.js';
import { every } from './live.js';
import { h, replace } from './ui.js';

/** How recent a poll must be for its handlers to count as served. */
export const POLLED_WITHIN_MS = 60 * 1000;

/**
 * unservedHandlers maps each handler of a RUNNING task step that no worker
 * polled for within POLLED_WITHIN_MS (before now) to its steps, in step order.
 */
export function unservedHandlers(inst, defSteps, workers, now = Date.now()) {
  const served = new Set();
  for (const w of workers) {
    if (now - Date.parse(w.last_poll_at) <= POLLED_WITHIN_MS) (w.handlers || []).forEach((x) => served.add(x));
  }
  const steps = inst?.state?.steps || {};
  const out = new Map();
  for (const d of defSteps || []) {
    if (d.type !== 'task' || !d.handler || steps[d.id]?.status !== 'RUNNING' || served.has(d.handler)) continue;
    if (!out.has(d.handler)) out.set(d.handler, []);
    out.get(d.handler).push(d.id);
  }
  return out;
}

/**
 * watchWorkers keeps the warnings in box current. current() returns
 * {inst, def} as the page last loaded them. GET /v1/workers is asked only
 * while the workflow has a RUNNING task step. Returns {update, stop}.
 */
export function watchWorkers(box, current) {
  let seq = 0;

  function taskSteps() {
    const { inst, def } = current();
    return (def?.definition?.steps || []).filter((d) => d.type === 'task' && inst?.state?.steps?.[d.id]?.status === 'RUNNING');
  }

  async function update() {
    const mine = ++seq;
    if (taskSteps().length === 0) {
      replace(box);
      return;
    }
    let workers;
    try {
      ({ data: { workers } } = await api.listWorkers());
    } catch {
      return; // the warning is advice: without the list, say nothing rather than guess
    }
    if (mine !== seq) return; // a newer update is under way
    const { inst, def } = current();
    render(unservedHandlers(inst, def?.definition?.steps, workers || []));
  }

  function render(unserved) {
    replace(box, [...unserved].map(([handler, steps]) => h('div', { class: 'worker-warning', role: 'status', 'data-handler': handler },
      h('strong', {}, 'No worker is polling for handler ', h('code', {}, handler)),
      ` — step${steps.length > 1 ? 's' : ''} ${steps.join(', ')} will stay RUNNING until one does. Start one with `,
      h('code', {}, `flowd worker --handler ${handler}=COMMAND`), '.')));
  }

  const stop = every(update);
  return { update, stop };
}
