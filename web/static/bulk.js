// Bulk operations: choose workflows by a filter, see how many match, confirm,
// and follow the operation the server works off (POST /v1/bulk, GET
// /v1/bulk/{id}); below, the recent operations with their progress, each
// RUNNING one with a button to stop it. The filter comes from the URL
// (#/bulk?status=&definition=&id_prefix=&search.NAME=VALUE&created_after=
// &created_before=), so the workflows page links here with its own.

import { api } from './api.js';
import { every } from './live.js';
import { h, replace, badge, when, errorBanner, banner, STATUSES } from './ui.js';

export const BULK_ACTIONS = ['cancel', 'pause', 'resume', 'retry', 'delete'];

/** filterOf reads a bulk filter (the API's shape) from query parameters. */
export function filterOf(query) {
  const f = {};
  for (const k of ['status', 'definition', 'id_prefix', 'parent', 'created_after', 'created_before', 'updated_before']) {
    const v = (query.get(k) || '').trim();
    if (v) f[k] = v;
  }
  for (const [k, v] of query.entries()) {
    if (k.startsWith('search.') && v !== '') {
      f.search = f.search || {};
      f.search[k.slice('search.'.length)] = v;
    }
  }
  return f;
}

/** describe is a filter in one line: "status=RUNNING definition=order". */
export function describe(f) {
  const parts = [];
  for (const k of ['status', 'definition', 'id_prefix', 'parent', 'created_after', 'created_before', 'updated_before']) {
    if (f[k]) parts.push(`${k}=${f[k]}`);
  }
  for (const [k, v] of Object.entries(f.search || {})) parts.push(`search.${k}=${v}`);
  return parts.join(' ');
}

// A datetime-local value (the browser's zone) as RFC 3339, and back.
const toRFC3339 = (local) => (local ? new Date(local).toISOString() : '');
const toLocal = (iso) => {
  if (!iso) return '';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '';
  const pad = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
};

export function mount(root, { query }) {
  const initial = filterOf(query);
  const st = { counted: null, following: query.get('op') || '', ops: [], error: null, totals: {} };

  const action = h('select', { id: 'bulk-action', onchange: () => resetCount() },
    BULK_ACTIONS.map((a) => h('option', { value: a, selected: a === (query.get('action') || 'cancel') }, a)));
  const status = h('select', { id: 'bulk-status', onchange: () => resetCount() },
    h('option', { value: '' }, 'Any status'),
    STATUSES.map((s) => h('option', { value: s, selected: s === initial.status }, s.replace('_', ' '))));
  const input = (id, value, placeholder) => h('input', { id, type: 'text', value: value || '', placeholder, autocomplete: 'off', spellcheck: 'false', oninput: () => resetCount() });
  const definition = input('bulk-definition', initial.definition, 'any');
  const idPrefix = input('bulk-id-prefix', initial.id_prefix, 'any');
  const search = h('textarea', { id: 'bulk-search', rows: 2, placeholder: 'NAME=VALUE, one a line', oninput: () => resetCount() },
    Object.entries(initial.search || {}).map(([k, v]) => `${k}=${v}`).join('\n'));
  const createdAfter = h('input', { id: 'bulk-created-after', type: 'datetime-local', value: toLocal(initial.created_after), oninput: () => resetCount() });
  const createdBefore = h('input', { id: 'bulk-created-before', type: 'datetime-local', value: toLocal(initial.created_before), oninput: () => resetCount() });
  const limit = h('input', { id: 'bulk-limit', type: 'number', min: '1', placeholder: 'all', oninput: () => resetCount() });
  const problem = h('div', { class: 'field-error', id: 'bulk-problem' });
  const confirmBox = h('div', { id: 'bulk-confirm', class: 'bulk-confirm', hidden: true });
  const progressBox = h('div', { id: 'bulk-progress', class: 'bulk-progress' });
  const countBtn = h('button', { type: 'submit', id: 'bulk-count', class: 'primary' }, 'Count matches');

  // The filter as the form says it; problems go to the form's error line.
  function filter() {
    const f = {};
    if (status.value) f.status = status.value;
    if (definition.value.trim()) f.definition = definition.value.trim();
    if (idPrefix.value.trim()) f.id_prefix = idPrefix.value.trim();
    if (initial.parent) f.parent = initial.parent;
    if (initial.updated_before) f.updated_before = initial.updated_before;
    for (const line of search.value.split('\n').map((l) => l.trim()).filter(Boolean)) {
      const i = line.indexOf('=');
      if (i <= 0) throw new Error(`search attribute “${line}”: write NAME=VALUE`);
      f.search = f.search || {};
      f.search[line.slice(0, i).trim()] = line.slice(i + 1).trim();
    }
    if (createdAfter.value) f.created_after = toRFC3339(createdAfter.value);
    if (createdBefore.value) f.created_before = toRFC3339(createdBefore.value);
    return f;
  }

  function resetCount() {
    st.counted = null;
    confirmBox.hidden = true;
    problem.textContent = '';
  }

  async function count(e) {
    e.preventDefault();
    resetCount();
    let f;
    try {
      f = filter();
    } catch (err) {
      problem.textContent = err.message;
      return;
    }
    if (Object.keys(f).length === 0) {
      problem.textContent = 'Choose at least one filter: a bulk operation never acts on every workflow.';
      return;
    }
    try {
      const { data } = await api.countBulk(f);
      st.counted = { filter: f, action: action.value, limit: Number(limit.value) || 0, ...data };
      showConfirm();
    } catch (err) {
      problem.textContent = err.describe ? err.describe() : String(err);
    }
  }

  function showConfirm() {
    const c = st.counted;
    let n = c.exact ? String(c.count) : `more than ${c.count.toLocaleString()}`;
    if (c.limit && (!c.exact || c.limit < c.count)) n = `${c.limit} (the limit) of ${n}`;
    const what = c.count === 0 ? 'No workflow matches this filter now.'
      : `${c.action} ${n} workflow${c.count === 1 && c.exact ? '' : 's'} matching ${describe(c.filter)}?`;
    replace(confirmBox,
      h('p', { id: 'bulk-confirm-text' }, what),
      c.count === 0 ? null : h('p', { class: 'muted' },
        'Workflows that change meanwhile are read again and skipped when they no longer match; workflows created from now on are not touched.'),
      h('div', { class: 'toolbar' },
        c.count === 0 ? null : h('button', { type: 'button', id: 'bulk-go', class: 'primary', onclick: create }, `Yes, ${c.action} them`),
        h('button', { type: 'button', id: 'bulk-back', onclick: resetCount }, 'Back')));
    confirmBox.hidden = false;
  }

  async function create() {
    const c = st.counted;
    const body = { action: c.action, filter: c.filter };
    if (c.limit) body.limit = c.limit;
    try {
      const { data } = await api.createBulk(body);
      resetCount();
      st.following = data.id;
      // The count before acting is the bar's length.
      st.totals[data.id] = c.exact ? (c.limit && c.limit < c.count ? c.limit : c.count) : 0;
      banner('success', `Bulk ${data.action} started: ${data.id}`);
      await load();
    } catch (err) {
      errorBanner('The bulk operation was refused', err);
    }
  }

  async function cancelOp(id) {
    try {
      await api.cancelBulk(id);
      await load();
    } catch (err) {
      errorBanner('Stopping the bulk operation failed', err);
    }
  }

  const tbody = h('tbody');
  replace(root,
    h('div', { class: 'page-head' }, h('h1', {}, 'Bulk operations'),
      h('a', { href: '#/workflows', class: 'muted' }, '← Workflows')),
    h('form', { id: 'bulk-form', class: 'card bulk-form', onsubmit: count },
      h('div', { class: 'card-head' }, h('h2', {}, 'Choose the workflows')),
      h('div', { class: 'bulk-grid' },
        h('label', { class: 'field' }, h('span', {}, 'Action'), action),
        h('label', { class: 'field' }, h('span', {}, 'Status'), status),
        h('label', { class: 'field' }, h('span', {}, 'Definition'), definition),
        h('label', { class: 'field' }, h('span', {}, 'ID prefix'), idPrefix),
        h('label', { class: 'field' }, h('span', {}, 'Created after'), createdAfter),
        h('label', { class: 'field' }, h('span', {}, 'Created before'), createdBefore),
        h('label', { class: 'field' }, h('span', {}, 'Search attributes'), search),
        h('label', { class: 'field' }, h('span', {}, 'At most'), limit)),
      initial.parent || initial.updated_before ? h('p', { class: 'muted' }, 'Also: ', describe({ parent: initial.parent, updated_before: initial.updated_before })) : null,
      problem,
      h('div', { class: 'toolbar' }, countBtn),
      confirmBox),
    progressBox,
    h('div', { class: 'card table-card' },
      h('div', { class: 'card-head' }, h('h2', {}, 'Recent operations')),
      h('table', { class: 'table', id: 'bulk-table' },
        h('thead', {}, h('tr', {}, h('th', {}, 'Action'), h('th', {}, 'Filter'), h('th', {}, 'Status'),
          h('th', {}, 'Progress'), h('th', {}, 'Started'), h('th', {}, ''))),
        tbody)));

  function bar(op, total) {
    const el = h('span', { class: 'progress bulk-bar', title: `${op.matched} of ${total}` }, h('span', { class: 'progress-bar' + (op.failed ? ' failed' : '') }));
    el.firstChild.style.width = `${total ? Math.min(100, Math.round((100 * op.matched) / total)) : (op.status === 'RUNNING' ? 0 : 100)}%`;
    return el;
  }

  function counts(op) {
    return `${op.matched} matched: ${op.done} done, ${op.skipped} skipped, ${op.failed} failed`;
  }

  function renderFollowed() {
    const op = st.ops.find((o) => o.id === st.following);
    if (!op) {
      replace(progressBox);
      return;
    }
    const total = st.totals[op.id] || (op.status === 'RUNNING' ? 0 : op.matched);
    replace(progressBox, h('div', { class: 'card', id: 'bulk-followed', 'data-id': op.id, 'data-status': op.status },
      h('div', { class: 'card-head' }, h('h2', {}, `Bulk ${op.action}`), badge(op.status), h('span', { class: 'mono muted' }, op.id)),
      h('p', {}, describe(op.filter)),
      h('p', { class: 'progress-cell' }, bar(op, total), h('span', { id: 'bulk-counts' }, counts(op))),
      op.errors && op.errors.length ? h('ul', { class: 'plain bulk-errors' }, op.errors.map((e) => h('li', {},
        h('a', { href: '#/workflows/' + encodeURIComponent(e.workflow_id), class: 'mono' }, e.workflow_id), ': ', e.error))) : null,
      op.status === 'RUNNING' ? h('button', { type: 'button', id: 'bulk-stop', onclick: () => cancelOp(op.id) }, 'Stop') : null));
  }

  function row(op) {
    return h('tr', { 'data-id': op.id, class: 'clickable', onclick: (e) => { if (!e.target.closest('button')) { st.following = op.id; renderFollowed(); } } },
      h('td', { class: 'mono' }, op.action),
      h('td', { class: 'mono' }, describe(op.filter)),
      h('td', {}, badge(op.status)),
      h('td', { class: 'bulk-row-counts' }, counts(op)),
      h('td', {}, when(op.created_at)),
      h('td', {}, op.status === 'RUNNING' ? h('button', { type: 'button', class: 'bulk-row-stop', onclick: () => cancelOp(op.id) }, 'Stop') : null));
  }

  async function load() {
    try {
      const { data } = await api.listBulk();
      st.ops = data.operations || [];
      st.error = null;
    } catch (err) {
      if (!st.error) errorBanner('Loading bulk operations failed', err);
      st.error = err;
      return;
    }
    if (st.ops.length === 0) {
      replace(tbody, h('tr', { class: 'empty-row' }, h('td', { colspan: 6 }, 'No bulk operations yet.')));
    } else {
      replace(tbody, st.ops.map(row));
    }
    renderFollowed();
  }
  load();
  return every(load);
}
