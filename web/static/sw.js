// Serverless Workflow on the dashboard. An instance of a Serverless Workflow
// document keeps its interpreter state under the top-level "sw" key of its
// state (its "steps" stay empty): the panel shows where it is — the pending
// items, each at a task's JSON pointer — and, once FAILED, the DSL error.
// A definition that is such a document is shown as its tasks and document.

import { h, jsonView, when } from './ui.js';

// The task kinds of the DSL: a task is a mapping with one of these keys.
const TASK_KINDS = ['call', 'set', 'switch', 'for', 'fork', 'try', 'raise', 'wait', 'emit', 'listen', 'run', 'do'];

/** swState is the interpreter state of a Serverless Workflow instance, or null. */
export function swState(w) {
  const sw = w?.state?.sw;
  return sw && typeof sw === 'object' && !Array.isArray(sw) ? sw : null;
}

/** swPendingCount says how many items a Serverless Workflow instance waits for. */
export function swPendingCount(w) {
  const pending = swState(w)?.pending;
  const n = pending && typeof pending === 'object' ? Object.keys(pending).length : 0;
  return n === 1 ? '1 item' : `${n} items`;
}

/** isSWDocument reports whether a stored definition is a Serverless Workflow 1.0 document. */
export function isSWDocument(def) {
  const dsl = def?.document?.dsl;
  return typeof dsl === 'string' && dsl.startsWith('1.0');
}

/** swPanel is the "Serverless Workflow" card of an instance page, or null. */
export function swPanel(w) {
  const sw = swState(w);
  if (!sw) return null;
  const pending = Object.entries(sw.pending && typeof sw.pending === 'object' ? sw.pending : {})
    .map(([id, item]) => ({ ...item, id }))
    .sort((a, b) => itemSeq(a.id) - itemSeq(b.id) || String(a.id).localeCompare(String(b.id)));
  // The API gives a FAILED instance its DSL error; the interpreter state
  // holds the same error, shown when the instance has none of its own.
  const error = w.status === 'FAILED' ? (w.error ?? sw.error ?? null) : null;
  return h('section', { class: 'card', id: 'wf-sw' },
    h('h2', {}, 'Serverless Workflow'),
    h('h3', { class: 'small-head' }, 'Position'),
    pending.length
      ? h('ul', { class: 'sw-pending', id: 'sw-pending' }, pending.map(pendingItem))
      : h('p', { class: 'muted', id: 'sw-pending-none' }, nothingPending(w.status)),
    error ? errorView(error) : null);
}

// Item ids are "sw-<n>": n orders them as the interpreter created them.
function itemSeq(id) {
  const m = /^sw-(\d+)$/.exec(String(id));
  return m ? Number(m[1]) : Number.MAX_SAFE_INTEGER;
}

function nothingPending(status) {
  if (status === 'COMPLETED') return 'Finished: nothing pending.';
  if (status === 'FAILED') return 'Faulted: nothing pending.';
  return 'Nothing pending.';
}

// What each kind of item waits for, in words.
function itemDetail(it) {
  switch (it.kind) {
    case 'call': return it.handler ? `handler ${it.handler}` : '';
    case 'listen': return `event ${it.event ?? ''}` + (it.key ? ` · key ${it.key}` : '');
    case 'child': return it.definition ? `child workflow of ${it.definition}` : '';
    case 'timer': return it.run_at ? `until ${new Date(it.run_at).toLocaleString()}` : '';
    case 'tick': return 'to evaluate now';
    case 'http': return httpTarget(it.input);
    case 'emit': return it.input?.type ? `event ${it.input.type}` : '';
    default: return '';
  }
}

function httpTarget(req) {
  if (!req || typeof req !== 'object') return '';
  if (req.kind === 'openapi') return `openapi ${req.operationId ?? ''}`;
  return [String(req.method ?? '').toUpperCase(), req.uri ?? ''].filter(Boolean).join(' ');
}

function pendingItem(it) {
  const detail = itemDetail(it);
  return h('li', { class: 'sw-item', 'data-item': it.id, 'data-kind': it.kind ?? '', 'data-pointer': it.pointer ?? '' },
    h('span', { class: 'mono sw-pointer' }, it.pointer || '/'),
    h('span', { class: 'tag' }, it.kind ?? '?'),
    detail ? h('span', { class: 'muted small' }, detail) : null,
    h('span', { class: 'muted small mono' }, it.id));
}

/** errorView shows a DSL error: type, status, title, detail, instance. */
function errorView(e) {
  const row = (label, value, field) => (value === undefined || value === null || value === ''
    ? null
    : h('div', { class: 'fact' }, h('dt', {}, label), h('dd', { class: 'mono', 'data-field': field }, String(value))));
  return h('div', { class: 'sw-error', id: 'sw-error', role: 'alert' },
    h('h3', { class: 'small-head' }, 'Error'),
    h('dl', { class: 'facts' },
      row('Type', e.type, 'type'),
      row('Status', e.status, 'status'),
      row('Title', e.title, 'title'),
      row('Detail', e.detail, 'detail'),
      row('Instance', e.instance, 'instance')));
}

/** taskKind is the kind of a task mapping ({set: …} → "set"). */
function taskKind(task) {
  if (!task || typeof task !== 'object') return '?';
  return TASK_KINDS.find((k) => Object.hasOwn(task, k)) ?? '?';
}

/** swTasks lists the top-level tasks of a document: name, kind, pointer. */
export function swTasks(def) {
  const list = Array.isArray(def?.do) ? def.do : [];
  return list.flatMap((entry, i) => Object.entries(entry && typeof entry === 'object' ? entry : {})
    .map(([name, task]) => ({ name, kind: taskKind(task), pointer: `/do/${i}/${name.replaceAll('~', '~0').replaceAll('/', '~1')}`, task })));
}

// The keys that tell a task's kind, in the order the server looks for them
// (a for task has a do, a try a catch).
const KIND_ORDER = ['for', 'try', 'fork', 'call', 'emit', 'listen', 'raise', 'run', 'set', 'switch', 'wait', 'do'];

/**
 * swTaskCount counts a document's tasks at every depth (the lists of do,
 * for.do, try, catch.do and fork.branches), as the server and `flowd def
 * list` count them.
 */
export function swTaskCount(def) {
  const list = (x) => (Array.isArray(x) ? x : []).reduce((n, entry) => {
    const named = entry && typeof entry === 'object' ? Object.values(entry) : [];
    return n + (named.length === 1 ? task(named[0]) : 0);
  }, 0);
  const task = (t) => {
    if (!t || typeof t !== 'object' || Array.isArray(t)) return 0;
    switch (KIND_ORDER.find((k) => Object.hasOwn(t, k))) {
      case undefined: return 0;
      case 'for': case 'do': return 1 + list(t.do);
      case 'try': return 1 + list(t.try) + list(t.catch?.do);
      case 'fork': return 1 + list(t.fork?.branches);
      default: return 1;
    }
  };
  return list(def?.do);
}

// What a task does, in a few words, for the definition page.
function taskSummary({ kind, task }) {
  const v = task?.[kind];
  switch (kind) {
    case 'call': {
      if (v === 'http') return `${String(task.with?.method ?? '').toUpperCase()} ${task.with?.endpoint?.uri ?? task.with?.endpoint ?? ''}`;
      if (v === 'openapi') return `openapi ${task.with?.operationId ?? ''}`;
      return `handler ${v}`;
    }
    case 'run': return v?.workflow ? `workflow ${v.workflow.name ?? ''}` : '';
    case 'emit': return v?.event?.with?.type ? `event ${v.event.with.type}` : '';
    case 'wait': return typeof v === 'string' ? v : JSON.stringify(v);
    case 'do': case 'try': return Array.isArray(v) ? `${v.length} task${v.length === 1 ? '' : 's'}` : '';
    case 'set': return v && typeof v === 'object' ? Object.keys(v).join(', ') : String(v ?? '');
    case 'switch': return Array.isArray(v) ? v.flatMap((c) => Object.keys(c ?? {})).join(' | ') : '';
    default: return '';
  }
}

/** swDefinitionCards are the cards of a definition page for a Serverless Workflow document. */
export function swDefinitionCards(info) {
  const def = info.definition;
  const d = def.document || {};
  const tasks = swTasks(def);
  return [
    h('section', { class: 'card', id: 'def-sw' },
      h('h2', {}, 'Serverless Workflow'),
      h('dl', { class: 'facts' },
        fact('DSL', d.dsl, 'sw-dsl'),
        fact('Namespace', d.namespace, 'sw-namespace'),
        fact('Version', d.version, 'sw-version'),
        fact('Tasks', `${swTaskCount(def)} at every depth, ${tasks.length} at the top`, 'sw-task-count'),
        d.title ? fact('Title', d.title, 'sw-title') : null,
        def.timeout ? fact('Timeout', JSON.stringify(def.timeout.after ?? def.timeout), 'sw-timeout') : null,
        fact('Stored', when(info.created_at)))),
    h('section', { class: 'card' },
      h('h2', {}, 'Tasks'),
      tasks.length
        ? h('table', { class: 'table', id: 'def-sw-tasks' },
          h('thead', {}, h('tr', {}, h('th', {}, 'Task'), h('th', {}, 'Kind'), h('th', {}, 'Pointer'), h('th', {}, 'Does'))),
          h('tbody', {}, tasks.map((t) => h('tr', { 'data-task': t.name },
            h('td', { class: 'mono' }, t.name),
            h('td', {}, h('span', { class: 'tag' }, t.kind)),
            h('td', { class: 'mono' }, t.pointer),
            h('td', { class: 'mono' }, taskSummary(t))))))
        : h('p', { class: 'muted' }, 'No tasks.')),
    h('section', { class: 'card' },
      h('details', { class: 'json-box', open: true }, h('summary', {}, 'Document'), jsonView(def, { id: 'def-json' }))),
  ];
}

function fact(label, value, id) {
  return h('div', { class: 'fact' }, h('dt', {}, label), h('dd', { class: 'mono', id }, value ?? h('span', { class: 'muted' }, '—')));
}
