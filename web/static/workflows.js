// The workflow list: status filter, search by id, paging with next_cursor and
// live refresh of the page shown.

import { api } from './api.js';
import { every } from './live.js';
import { h, replace, badge, when, stepCounts, errorBanner, banner, STATUSES } from './ui.js';

const PAGE_SIZE = 50; // the API's default; #/workflows?limit=N asks for another

export function mount(root, { query }) {
  const status = query.get('status') || '';
  const definition = query.get('definition') || '';
  const limit = Number(query.get('limit')) || PAGE_SIZE;
  const st = { cursors: [''], page: 0, rows: [], next: '', search: '', loaded: false, error: null };

  const setQuery = (changes) => {
    const q = new URLSearchParams(query);
    for (const [k, v] of Object.entries(changes)) {
      if (v) q.set(k, v); else q.delete(k);
    }
    const qs = q.toString();
    location.hash = '#/workflows' + (qs ? '?' + qs : '');
  };

  const statusSelect = h('select', { id: 'status-filter', onchange: (e) => setQuery({ status: e.target.value }) },
    h('option', { value: '' }, 'All statuses'),
    STATUSES.map((s) => h('option', { value: s, selected: s === status }, s.replace('_', ' '))));

  const search = h('input', {
    id: 'search', type: 'search', placeholder: 'Search by id (Enter opens it)',
    'aria-label': 'Search by workflow id', autocomplete: 'off', spellcheck: 'false',
    oninput: (e) => { st.search = e.target.value.trim(); renderRows(); },
  });
  const searchForm = h('form', { id: 'search-form', class: 'search', onsubmit: (e) => { e.preventDefault(); openExact(); } }, search);

  const tbody = h('tbody');
  const foot = h('div', { class: 'table-foot' });
  const table = h('table', { id: 'wf-table', class: 'table' },
    h('thead', {}, h('tr', {},
      h('th', {}, 'ID'), h('th', {}, 'Definition'), h('th', {}, 'Status'),
      h('th', { class: 'num' }, 'Version'), h('th', {}, 'Steps'), h('th', {}, 'Updated'))),
    tbody);

  replace(root,
    h('div', { class: 'page-head' },
      h('h1', {}, 'Workflows'),
      h('div', { class: 'toolbar' },
        h('label', { class: 'field' }, h('span', {}, 'Status'), statusSelect),
        definition ? h('span', { class: 'chip' }, 'definition: ', h('code', {}, definition),
          h('button', { type: 'button', class: 'chip-x', 'aria-label': 'Remove definition filter', onclick: () => setQuery({ definition: '' }) }, '×')) : null,
        searchForm)),
    h('div', { class: 'card table-card' }, table, foot));

  async function load() {
    try {
      const { data } = await api.listWorkflows({ status, definition, cursor: st.cursors[st.page], limit });
      st.rows = data.workflows || [];
      st.next = data.next_cursor || '';
      st.error = null;
    } catch (err) {
      if (!st.error || st.error.describe?.() !== err.describe?.()) errorBanner('Loading workflows failed', err);
      st.error = err;
    }
    st.loaded = true;
    st.refreshed = new Date();
    renderRows();
  }

  async function openExact() {
    const id = st.search;
    if (!id) return;
    try {
      await api.getWorkflow(id);
      location.hash = '#/workflows/' + encodeURIComponent(id);
    } catch (err) {
      if (err.status === 404) banner('info', `No workflow has the id “${id}”; the list shows the ids on this page that contain it.`);
      else errorBanner('Search failed', err);
    }
  }

  function renderRows() {
    const needle = st.search.toLowerCase();
    const rows = needle ? st.rows.filter((w) => w.id.toLowerCase().includes(needle)) : st.rows;
    replace(tbody, rows.map(row));
    if (st.loaded && rows.length === 0) {
      let msg;
      if (st.error?.status === 401) msg = 'Waiting for a token…';
      else if (st.error) msg = 'Could not load the workflows.';
      else if (needle) msg = `No workflow on this page has an id containing “${st.search}”. Press Enter to look the id up exactly.`;
      else if (status || definition) msg = 'No workflows match these filters.';
      else msg = 'No workflows yet. Start one with “flowd start DEFINITION” or POST /v1/workflows.';
      tbody.append(h('tr', { class: 'empty-row' }, h('td', { colspan: 6 }, msg)));
    }
    const info = [];
    if (st.loaded) {
      info.push(needle ? `${rows.length} of ${st.rows.length} on this page` : `${st.rows.length} on page ${st.page + 1}`);
      if (st.refreshed) info.push(`refreshed ${st.refreshed.toLocaleTimeString()}`);
    } else {
      info.push('Loading…');
    }
    replace(foot,
      h('span', { class: 'muted', id: 'list-info' }, info.join(' · ')),
      h('span', { class: 'pager' },
        h('button', { type: 'button', id: 'page-prev', disabled: st.page === 0, onclick: () => { st.page--; load(); } }, '← Newer'),
        h('button', { type: 'button', id: 'page-next', disabled: !st.next, onclick: () => { st.cursors[st.page + 1] = st.next; st.page++; load(); } }, 'Older →')));
  }

  function row(w) {
    const href = '#/workflows/' + encodeURIComponent(w.id);
    const { done, total } = stepCounts(w.state);
    const tr = h('tr', { class: 'clickable', 'data-id': w.id, onclick: (e) => { if (!e.target.closest('a')) location.hash = href; } },
      h('td', { class: 'mono' }, h('a', { href, class: 'wf-link' }, w.id)),
      h('td', {}, w.definition
        ? h('a', { href: '#/definitions/' + encodeURIComponent(w.definition) }, w.definition)
        : h('span', { class: 'muted' }, 'free-form')),
      h('td', {}, badge(w.status)),
      h('td', { class: 'num mono' }, String(w.version)),
      h('td', {}, total === 0 ? h('span', { class: 'muted' }, '—') : h('span', { class: 'progress-cell' },
        h('span', { class: 'progress', title: `${done} of ${total} steps done` },
          h('span', { class: 'progress-bar' + (w.status === 'FAILED' ? ' failed' : '') })),
        h('span', { class: 'mono' }, `${done}/${total}`))),
      h('td', {}, when(w.updated_at)));
    const bar = tr.querySelector('.progress-bar');
    if (bar) bar.style.width = `${Math.round((100 * done) / total)}%`;
    return tr;
  }

  renderRows();
  load();
  return every(load);
}
