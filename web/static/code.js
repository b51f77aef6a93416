// Workflows as code on the dashboard. A code definition has `code:
// {handler}` instead of steps: a function a worker serves under that name.
// Its instances record their steps as the function runs: state.steps.NAME
// with a kind (step, sleep, event, child) and a seq, the order they were
// recorded in; state.code is the runs' bookkeeping {run, waiting, seq,
// error}. The instance page shows the entries as a timeline in seq order,
// the definition page names the handler and the workers that serve it.

import { api } from './api.js';
import { childLinks } from './children.js';
import { POLLED_WITHIN_MS } from './workers.js';
import { h, replace, badge, jsonView, compact, when, ago } from './ui.js';
import { isObject } from './jsondiff.js';

const KINDS = ['step', 'sleep', 'event', 'child'];
const ACTIVE = ['RUNNING', 'WAITING'];

/** isCodeDefinition reports whether a stored definition is a code definition. */
export function isCodeDefinition(def) {
  return isObject(def?.code) && typeof def.code.handler === 'string';
}

/** codeState is state.code of a code workflow instance ({run, waiting, seq, error}), or null. */
export function codeState(w) {
  const c = w?.state?.code;
  return isObject(c) ? c : null;
}

/** entryKind is the kind of a recorded entry: step when it says none. */
export function entryKind(s) {
  return KINDS.includes(s?.kind) ? s.kind : 'step';
}

/**
 * codeEntries are the instance's recorded entries in the order they were
 * recorded (seq); entries without a seq come last, by name.
 */
export function codeEntries(w) {
  const steps = isObject(w?.state?.steps) ? w.state.steps : {};
  const seq = (s) => (Number.isInteger(s?.seq) ? s.seq : Number.MAX_SAFE_INTEGER);
  return Object.entries(steps)
    .map(([id, s]) => ({ id, s }))
    .sort((a, b) => seq(a.s) - seq(b.s) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

/**
 * errorText is a recorded error as one line: a string as it is, an error
 * object as "TYPE: MESSAGE" (the type alone or the message alone when it
 * has only one), anything else as JSON.
 */
export function errorText(e) {
  if (e === undefined || e === null) return '';
  if (typeof e === 'string') return e;
  if (isObject(e)) {
    const type = typeof e.type === 'string' ? e.type : '';
    const msg = typeof e.message === 'string' ? e.message : '';
    if (type || msg) return [type, msg].filter(Boolean).join(': ');
  }
  return JSON.stringify(e);
}

/** at shows an absolute time and, in brackets, how far it is from now. */
function at(iso, attrs = {}) {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return h('span', { class: 'mono', ...attrs }, String(iso));
  return h('span', attrs, h('time', { datetime: iso, title: iso }, d.toLocaleString()), h('span', { class: 'muted' }, ` (${ago(d)})`));
}

/** runState says in words where the runs of the instance are. */
function runState(w, c, entries) {
  switch (w.status) {
    case 'COMPLETED': return 'completed';
    case 'FAILED': return 'failed';
    case 'CANCELLED': return 'cancelled';
    case 'TIMED_OUT': return 'timed out';
    case 'PAUSED': return 'paused';
    case 'PENDING': case 'QUEUED': return 'not started';
    default:
  }
  if (c.waiting) {
    const waits = entries.filter((x) => ACTIVE.includes(x.s?.status)).map((x) => x.id);
    return waits.length ? `waiting for ${waits.join(', ')}` : 'waiting';
  }
  return 'running: the run is queued or on a worker';
}

/**
 * codeStepsCard fills the steps card of a code workflow: the runs'
 * bookkeeping, then the entries in seq order. opts: handler (the
 * definition's code.handler, when known), times (step id → node or null:
 * when it started and finished), open (a Set of open output boxes) and
 * toggle(key, open).
 */
export function codeStepsCard(box, w, opts) {
  const c = codeState(w) || {};
  const entries = codeEntries(w);
  const error = c.error || (w.status === 'FAILED' ? errorText(w.error) : '');
  replace(box,
    h('div', { class: 'card-head' }, h('h2', {}, 'Steps'),
      h('span', { class: 'muted small' }, 'in the order the code recorded them')),
    h('dl', { class: 'facts code-runs', id: 'code-runs' },
      fact('Run', h('span', { class: 'mono', id: 'code-run', title: 'each delivery of the run task is a run of the function; a wait ends one' },
        Number.isInteger(c.run) ? String(c.run) : '—')),
      fact('Now', h('span', { id: 'code-run-state', 'data-waiting': String(Boolean(c.waiting)) }, runState(w, c, entries))),
      opts.handler ? fact('Handler', h('code', { id: 'code-handler' }, opts.handler)) : null),
    error ? h('div', { class: 'step-error', id: 'code-error' }, error) : null,
    entries.length
      ? h('ol', { class: 'steps code-timeline', id: 'code-timeline' }, entries.map((x) => entryItem(x, opts)))
      : h('p', { class: 'muted', id: 'code-timeline-empty' }, 'Nothing recorded yet: the function records its steps and waits as it runs.'));
}

function fact(label, ...value) {
  return h('div', { class: 'fact' }, h('dt', {}, label), h('dd', {}, ...value));
}

function entryItem({ id, s }, opts) {
  const status = typeof s?.status === 'string' ? s.status : 'PENDING';
  const kind = entryKind(s);
  const openKey = 'out:' + id;
  const hasOut = s && Object.hasOwn(s, 'output') && !(kind === 'sleep' && s.output === null);
  const err = errorText(s?.error);
  return h('li', {
    class: `step code-entry st-border-${status}`, id: 'step-' + id,
    'data-step': id, 'data-kind': kind, 'data-status': status, 'data-seq': Number.isInteger(s?.seq) ? String(s.seq) : '',
  },
  h('div', { class: 'step-row' },
    h('span', { class: 'code-seq mono muted', title: 'seq: the order it was recorded in' }, Number.isInteger(s?.seq) ? `#${s.seq}` : '#?'),
    badge(status),
    h('span', { class: 'step-id mono' }, id),
    h('span', { class: 'tag code-kind' }, kind),
    h('span', { class: 'spacer' }),
    opts.times?.(id, status) ?? null,
    attemptsView(s, status),
    opts.rerun?.(id, s) ?? null),
  detail(id, kind, s, status),
  err ? h('div', { class: 'step-error', 'data-error-type': isObject(s.error) && typeof s.error.type === 'string' ? s.error.type : '' }, err) : null,
  hasOut ? h('details', { class: 'step-output', open: opts.open?.has(openKey) || undefined, ontoggle: (e) => opts.toggle?.(openKey, e.target.open) },
    h('summary', {}, kind === 'event' ? 'Event data ' : 'Output ', h('span', { class: 'muted mono' }, compact(s.output, 60))),
    jsonView(s.output)) : null);
}

// attemptsView: a step's attempts in the worker, and how many failed.
function attemptsView(s, status) {
  const n = s?.attempts;
  if (!Number.isInteger(n) || n < 1) return null;
  let text = n === 1 ? '1 attempt' : `${n} attempts`;
  if (status === 'FAILED') text += n === 1 ? ', failed' : ', all failed';
  else if (n > 1) text += ` (${n - 1} failed)`;
  return h('span', { class: 'muted small code-attempts', title: 'attempts the worker made, its own retries included' }, text);
}

// detail is what a wait waits for: a sleep's time, an event's name, key and
// timeout, a child's definition and workflow.
function detail(id, kind, s, status) {
  if (kind === 'sleep') {
    if (typeof s?.until !== 'string') return null;
    return h('div', { class: 'code-detail small', 'data-until': s.until },
      status === 'WAITING' ? 'sleeps until ' : 'slept until ', at(s.until));
  }
  if (kind === 'event') {
    const ev = isObject(s?.event) ? s.event : {};
    const name = typeof ev.name === 'string' ? ev.name : '';
    const parts = [
      status === 'WAITING' ? 'waits for event ' : status === 'COMPLETED' ? 'completed by event ' : 'waited for event ',
      h('span', { class: 'mono event-name' }, name),
      ev.key ? [' · key ', h('span', { class: 'mono event-key' }, ev.key)] : ' · no key',
    ];
    if (status === 'COMPLETED' && typeof ev.id === 'string') parts.push(h('span', { class: 'muted' }, ` (event ${ev.id})`));
    if (typeof s?.timeout_at === 'string') {
      parts.push(h('span', { class: 'code-timeout', 'data-timeout-at': s.timeout_at },
        status === 'WAITING' ? ' · times out ' : ' · timeout ', at(s.timeout_at)));
    }
    return h('div', { class: 'code-detail step-event small', 'data-event': name }, parts);
  }
  if (kind === 'child') {
    const def = typeof s?.definition === 'string' ? s.definition : '';
    return h('div', { class: 'code-detail small' },
      def ? h('span', { class: 'code-child-def' }, 'child workflow of definition ',
        h('a', { href: '#/definitions/' + encodeURIComponent(def), class: 'mono' }, def)) : null,
      childLinks(id, s));
  }
  return null;
}

// ---- the definition page ----------------------------------------------------

// The server's defaults for a retry policy's unset fields.
const RETRY_DEFAULTS = { max_attempts: 3, initial_backoff: '1s', max_backoff: '1m' };

/** runRetryText says how failed runs are retried: the definition's retry, defaults filled in. */
export function runRetryText(retry) {
  const r = isObject(retry) ? retry : {};
  const n = r.max_attempts || RETRY_DEFAULTS.max_attempts;
  const text = `${n === 1 ? '1 attempt' : `${n} attempts`}, backoff from ${r.initial_backoff || RETRY_DEFAULTS.initial_backoff} up to ${r.max_backoff || RETRY_DEFAULTS.max_backoff}`;
  return isObject(retry) ? text : `${text} (the defaults)`;
}

/** servingWorkers are the workers whose handlers include handler, latest poll first. */
export function servingWorkers(workers, handler) {
  return (workers || [])
    .filter((w) => Array.isArray(w.handlers) && w.handlers.includes(handler))
    .sort((a, b) => (Date.parse(b.last_poll_at) || 0) - (Date.parse(a.last_poll_at) || 0) || String(a.worker).localeCompare(String(b.worker)));
}

/**
 * codeDefinitionCards are the cards of a code definition's page below its
 * header: the workers serving its handler (box, filled by the returned
 * load(), which the page calls again to refresh it) and its JSON.
 */
export function codeDefinitionCards(def) {
  const handler = def.code.handler;
  const box = h('div', { id: 'def-workers-box' }, h('p', { class: 'muted' }, 'Loading the workers…'));
  let failed = false;
  async function load() {
    let workers;
    try {
      ({ data: { workers } } = await api.listWorkers());
      failed = false;
    } catch (err) {
      if (!failed) replace(box, h('p', { class: 'muted', id: 'def-workers-error' }, 'Could not load the workers: ', err?.describe ? err.describe() : String(err?.message || err)));
      failed = true;
      return;
    }
    const mine = servingWorkers(workers, handler);
    if (mine.length === 0) {
      replace(box, h('p', { class: 'muted', id: 'def-workers-none' },
        'No worker polled for handler ', h('code', {}, handler), ' in the last five minutes: runs of this definition wait in its queue until one does. ',
        'A worker serves it with ', h('code', {}, `worker.Workflow("${handler}", …)`), ' (Go), ', h('code', {}, `@worker.workflow("${handler}")`),
        ' (Python) or ', h('code', {}, `worker.workflow("${handler}", …)`), ' (TypeScript).'));
      return;
    }
    const now = Date.now();
    replace(box, h('table', { class: 'table', id: 'def-workers' },
      h('thead', {}, h('tr', {}, h('th', {}, 'Worker'), h('th', {}, 'Node'), h('th', {}, 'Last poll'), h('th', {}, 'Handlers'))),
      h('tbody', {}, mine.map((w) => {
        const stale = !(now - Date.parse(w.last_poll_at) <= POLLED_WITHIN_MS);
        return h('tr', { 'data-worker': w.worker, class: stale ? 'stale' : null },
          h('td', { class: 'mono' }, w.worker),
          h('td', { class: 'mono' }, w.node || h('span', { class: 'muted' }, '—')),
          h('td', {}, when(w.last_poll_at), stale ? h('span', { class: 'muted small' }, ' · not in the last minute') : null),
          h('td', { class: 'mono small' }, (w.handlers || []).join(', ')));
      }))));
  }
  const cards = [
    h('section', { class: 'card' },
      h('div', { class: 'card-head' }, h('h2', {}, 'Workers'),
        h('span', { class: 'muted small' }, 'polling for handler ', h('code', {}, handler), ' in the last five minutes')),
      box),
    h('section', { class: 'card' },
      h('details', { class: 'json-box' }, h('summary', {}, 'Definition JSON'), jsonView(def, { id: 'def-json' }))),
  ];
  return { cards, load };
}
