// The workers page (every worker seen polling: live or stale, its handlers,
// its tasks in flight), and warnings on the workflow page for RUNNING task
// steps that nothing will run:
// no worker — a remote one or a node's in-process pool — has polled for the
// step's handler in the last 60 seconds (GET /v1/workers). Such a step stays
// RUNNING until a worker for its handler appears, so the page says how to
// start one.
//
// Self-contained: the workflow page gives it a box and a way to read the
// instance and its definition, and calls update() when they change.

import { api } from './api.js';
import { every } from './live.js';
import { h, replace, when, errorBanner } from './ui.js';

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

/** isLive reports whether a worker polled within POLLED_WITHIN_MS of now. */
export function isLive(w, now = Date.now()) {
  return now - Date.parse(w.last_poll_at) <= POLLED_WITHIN_MS;
}

/**
 * mount is the workers page: every worker and in-process pool the cluster
 * saw polling in the last five minutes (GET /v1/workers), live when it
 * polled within the last minute, stale otherwise; live-refreshed.
 */
export function mount(root) {
  const tbody = h('tbody');
  const summary = h('p', { class: 'muted', id: 'workers-summary' });
  replace(root,
    h('div', { class: 'page-head' }, h('h1', {}, 'Workers')),
    h('p', { class: 'hint' }, 'Remote workers (', h('code', {}, 'flowd worker'), ', the SDKs) and each node\'s in-process pool, as the nodes saw them poll in the last five minutes. ',
      `A worker is live when it polled within the last ${POLLED_WITHIN_MS / 1000} seconds, stale after that.`),
    summary,
    h('div', { class: 'card table-card' },
      h('table', { class: 'table', id: 'workers-table' },
        h('thead', {}, h('tr', {},
          h('th', {}, 'Worker'), h('th', {}, 'Node'), h('th', {}, 'Handlers'), h('th', {}, 'Last poll'),
          h('th', {}, 'State'), h('th', { class: 'num', title: 'tasks leased to this worker now, on any node' }, 'Tasks in flight'))),
        tbody)));
  let failed = false;
  const load = async () => {
    let list;
    try {
      list = (await api.listWorkers()).data.workers || [];
      failed = false;
    } catch (err) {
      if (!failed) errorBanner('Loading workers failed', err);
      failed = true;
      return;
    }
    const now = Date.now();
    const live = list.filter((w) => isLive(w, now)).length;
    summary.textContent = list.length === 0 ? '' : `${live} live, ${list.length - live} stale.`;
    if (list.length === 0) {
      replace(tbody, h('tr', { class: 'empty-row' }, h('td', { colspan: 6 },
        'No worker polled in the last five minutes. Start one with “flowd worker --handler NAME=COMMAND”.')));
      return;
    }
    replace(tbody, list.map((w) => workerRow(w, now)));
  };
  load();
  return every(load);
}

function workerRow(w, now) {
  const liveNow = isLive(w, now);
  const pool = w.worker === w.node;
  return h('tr', { 'data-worker': w.worker, 'data-node': w.node, 'data-state': liveNow ? 'live' : 'stale' },
    h('td', {}, h('span', { class: 'mono' }, w.worker), pool ? h('span', { class: 'tag tag-pool', title: 'the in-process workers of this node' }, 'in-process') : null),
    h('td', { class: 'mono' }, w.node),
    h('td', {}, (w.handlers || []).length
      ? h('span', { class: 'handlers' }, (w.handlers || []).map((x) => h('code', { class: 'handler' }, x)))
      : h('span', { class: 'muted' }, 'none')),
    h('td', {}, when(w.last_poll_at)),
    h('td', {}, h('span', { class: `badge ${liveNow ? 'st-COMPLETED' : 'st-CANCELLED'} worker-state` }, liveNow ? 'live' : 'stale')),
    h('td', { class: 'num mono in-flight' }, String(w.in_flight ?? 0)));
}
