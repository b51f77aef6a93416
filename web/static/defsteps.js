// The steps of a definition as its page shows them: one row a step with
// what it runs (a wait step's event, a workflow step's child definition and
// its runs), when it runs (when, join, foreach), how it is retried and timed
// out and what bounds it (concurrency, rate limit); and the definition's own
// facts beyond its steps (concurrency, priority, output).

import { h } from './ui.js';
import { topoOrder } from './dag.js';

const DEFAULT_PRIORITY = 3;

// What a join waits for, said in full for the tooltip.
const JOINS = {
  all: 'ready when every dependency is COMPLETED; SKIPPED when one is SKIPPED',
  any: 'ready when every dependency has finished and one at least is COMPLETED',
  first: 'ready as soon as one dependency is COMPLETED; the others are withdrawn',
};

/** stepsTable is the table of a definition's steps, in graph order. */
export function stepsTable(def) {
  return h('table', { class: 'table def-steps', id: 'def-steps' },
    h('thead', {}, h('tr', {},
      h('th', {}, 'Step'), h('th', {}, 'Type'), h('th', {}, 'Runs'), h('th', {}, 'After'),
      h('th', {}, 'Flow'), h('th', {}, 'Retry'), h('th', {}, 'Timeout'), h('th', {}, 'Limits'))),
    h('tbody', {}, topoOrder(def.steps || []).map((s) => stepRow(s, def))));
}

/** definitionFacts are the facts of a steps definition beyond its steps. */
export function definitionFacts(def) {
  const c = def.concurrency;
  return [
    h('div', { class: 'fact' }, h('dt', {}, 'Priority'), h('dd', { id: 'def-priority' },
      def.priority ? String(def.priority) : h('span', { class: 'muted' }, `${DEFAULT_PRIORITY} (default)`))),
    c ? h('div', { class: 'fact' }, h('dt', {}, 'Concurrency'), h('dd', { id: 'def-concurrency' },
      `≤ ${c.limit} running`, c.key ? [' per key ', h('code', {}, c.key)] : ' in all',
      h('span', { class: 'muted' }, ` · over it: ${(c.strategy || 'queue').replaceAll('_', ' ')}`))) : null,
    def.output !== undefined ? h('div', { class: 'fact' }, h('dt', {}, 'Output'), h('dd', {},
      h('code', { id: 'def-output', class: 'clip', title: JSON.stringify(def.output, null, 2) }, JSON.stringify(def.output)))) : null,
  ];
}

// line is one labelled line of a cell: "label value".
function line(label, ...value) {
  return h('div', { class: 'cell-line' }, label ? h('span', { class: 'muted' }, label + ' ') : null, ...value);
}

const none = () => h('span', { class: 'muted' }, '—');

function stepRow(s, def) {
  return h('tr', { 'data-step': s.id },
    h('td', { class: 'mono' }, s.id),
    h('td', {}, h('span', { class: 'tag' }, s.type)),
    h('td', { class: 'runs' }, runsCell(s, def)),
    h('td', {}, s.depends_on?.length ? h('span', { class: 'mono' }, s.depends_on.join(', ')) : none()),
    h('td', { class: 'flow' }, flowCell(s)),
    h('td', { class: 'retry' }, retryText(s) || h('span', { class: 'muted' }, retried(s) ? 'default' : '—')),
    h('td', { class: 'timeout' }, s.timeout ? h('span', { class: 'mono' }, s.timeout) : none()),
    h('td', { class: 'limits' }, limitsCell(s)));
}

// Task, http and workflow steps are retried (by default when no retry is given).
const retried = (s) => s.type === 'task' || s.type === 'http' || s.type === 'workflow';

function runsCell(s, def) {
  switch (s.type) {
    case 'task': return [h('code', {}, s.handler || ''), inputLine(s)];
    case 'sleep': return h('span', { class: 'mono' }, s.duration || '');
    case 'http': return h('span', { class: 'mono' }, s.request ? `${s.request.method} ${s.request.url}` : '');
    case 'wait': return waitCell(s, def);
    case 'workflow': {
      const name = s.definition || '';
      return [
        line('child of', h('a', { href: '#/definitions/' + encodeURIComponent(name), class: 'mono', 'data-child-definition': name }, name)),
        line('', h('a', { href: '#/workflows?definition=' + encodeURIComponent(name), 'data-child-runs': name }, 'its runs →')),
        inputLine(s),
      ];
    }
    default: return '';
  }
}

// A wait step is completed through the API, or by an event: its name, the
// key template narrowing it, and how long it may wait (the workflow's
// timeout: a wait step has none of its own).
function waitCell(s, def) {
  if (!s.event) return h('span', { class: 'muted' }, 'completed through the API');
  return [
    line('waits for event', h('code', { class: 'wait-event' }, s.event)),
    s.key ? line('with key', h('code', { class: 'wait-key' }, s.key)) : line('with key', h('span', { class: 'muted wait-key' }, 'none (events published without one)')),
    line('', h('span', { class: 'muted wait-timeout' },
      def.timeout ? `until the workflow's timeout (${def.timeout})` : 'no timeout: the workflow has none')),
  ];
}

function inputLine(s) {
  if (s.input === undefined || s.input === null) return null;
  const text = JSON.stringify(s.input);
  return line('input', h('code', { class: 'clip', title: JSON.stringify(s.input, null, 2) }, text));
}

function flowCell(s) {
  const lines = [];
  if (s.when) lines.push(line('when', h('code', { class: 'flow-when' }, s.when)));
  if (s.join) lines.push(line('join', h('code', { class: 'flow-join', title: JOINS[s.join] || '' }, s.join)));
  if (s.foreach) {
    lines.push(line('foreach', h('code', { class: 'flow-foreach' }, s.foreach)));
    lines.push(line('', h('span', { class: 'muted flow-max' },
      s.max_concurrency ? `≤ ${s.max_concurrency} items at once` : 'every item at once')));
  }
  return lines.length ? lines : none();
}

function retryText(s) {
  const r = s.retry;
  if (!r) return '';
  return [r.max_attempts ? `${r.max_attempts}×` : '', r.initial_backoff ? `from ${r.initial_backoff}` : '', r.max_backoff ? `up to ${r.max_backoff}` : '']
    .filter(Boolean).join(' ');
}

function limitsCell(s) {
  const lines = [];
  const c = s.concurrency;
  if (c) lines.push(line('', `≤ ${c.limit} leased per key `, h('code', { class: 'limit-concurrency' }, c.key)));
  const r = s.rate_limit;
  if (r) {
    lines.push(line('', h('span', { class: 'limit-rate' }, `${r.per_second}/s`, r.burst ? ` (burst ${r.burst})` : ''),
      r.key ? [' per key ', h('code', {}, r.key)] : ''));
  }
  return lines.length ? lines : none();
}
