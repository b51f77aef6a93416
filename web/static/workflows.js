// The workflow list: status filter, search by id, paging with next_cursor and
// live refresh of the page shown. The search shows the ids on the page shown
// that contain the text, and every id that starts with it, asked of the server
// (id_prefix), so an id beyond the page is found too.

import { api } from './api.js';
import { every } from './live.js';
import { h, replace, badge, when, stepCounts, errorBanner, banner, STATUSES } from './ui.js';
import { startLink } from './start.js';
import { listFilters, filterChips, filterForm } from './listfilters.js';

// bulkLink opens the bulk operations page with this list's filter.
function bulkLink(query) {
  const q = new URLSearchParams();
  for (const [k, v] of query.entries()) if (k !== 'limit' && k !== 'search' && v) q.set(k, v);
  const qs = q.toString();
  return h('a', { href: '#/bulk' + (qs ? '?' + qs : ''), id: 'bulk-link', class: 'button' }, 'Act on these…');
}

const PAGE_SIZE = 50; // the API's default; #/workflows?limit=N asks for another
const ID_PREFIX = /^[A-Za-z0-9._:-]{1,128}$/; // what the server accepts as id_prefix
const SEARCH_DELAY_MS = 150; // typing pauses this long before the server is asked

export function mount(root, { query }) {
  const status = query.get('status') || '';
  const definition = query.get('definition') || '';
  const limit = Number(query.get('limit')) || PAGE_SIZE;
  const filters = listFilters(query);
  // ?search=PREFIX opens the list searched (the schedules page links to
  // the instances of a schedule this way: their ids start with its name).
  const st = { cursors: [''], page: 0, rows: [], next: '', search: (query.get('search') || '').trim(), loaded: false, error: null };
  // found: the server's answer for the id prefix foundFor (first page only).
  const found = { rows: [], for: '', more: false, seq: 0, timer: 0 };

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
    id: 'search', type: 'search', placeholder: 'Search by id (Enter opens it)', value: st.search,
    'aria-label': 'Search by workflow id', autocomplete: 'off', spellcheck: 'false',
    oninput: (e) => {
      st.search = e.target.value.trim();
      renderRows();
      clearTimeout(found.timer);
      found.seq++; // an answer still on its way is for an older text
      if (ID_PREFIX.test(st.search)) found.timer = setTimeout(searchServer, SEARCH_DELAY_MS);
    },
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
        filterChips(query, setQuery),
        searchForm,
        bulkLink(query),
        startLink(definition))),
    filterForm(query, setQuery),
    h('div', { class: 'card table-card' }, table, foot));

  async function load() {
    try {
      const { data } = await api.listWorkflows({ status, definition, cursor: st.cursors[st.page], limit, filters: filters.params });
      st.rows = data.workflows || [];
      st.next = data.next_cursor || '';
      st.error = null;
    } catch (err) {
      if (!st.error || st.error.describe?.() !== err.describe?.()) errorBanner('Loading workflows failed', err);
      st.rows = [];
      st.error = err;
    }
    st.loaded = true;
    st.refreshed = new Date();
    renderRows();
    if (st.search) await searchServer();
  }

  // searchServer asks for the ids that start with the search text, with the
  // list's filters. An answer that a newer search overtook is dropped. Text
  // that no id can start with is not sent: the page's rows are all there is.
  async function searchServer() {
    const prefix = st.search;
    if (!ID_PREFIX.test(prefix)) return;
    const seq = ++found.seq;
    try {
      const { data } = await api.listWorkflows({ status, definition, idPrefix: prefix, limit, filters: filters.params });
      if (seq !== found.seq) return;
      Object.assign(found, { rows: data.workflows || [], for: prefix, more: !!data.next_cursor });
    } catch (err) {
      if (seq !== found.seq) return;
      Object.assign(found, { rows: [], for: prefix, more: false });
      errorBanner('Searching the workflows failed', err);
    }
    renderRows();
  }

  async function openExact() {
    const id = st.search;
    if (!id) return;
    try {
      await api.getWorkflow(id);
      location.hash = '#/workflows/' + encodeURIComponent(id);
    } catch (err) {
      if (err.status === 404) banner('info', `No workflow has the id “${id}”; the list shows the ids that start with it and those on this page that contain it.`);
      else errorBanner('Search failed', err);
    }
  }

  function renderRows() {
    const needle = st.search.toLowerCase();
    let rows = st.rows;
    if (needle) {
      rows = st.rows.filter((w) => w.id.toLowerCase().includes(needle));
      const shown = new Set(rows.map((w) => w.id));
      const beyond = found.for === st.search ? found.rows.filter((w) => !shown.has(w.id)) : [];
      // Newest first, as the server lists them.
      rows = rows.concat(beyond).sort((a, b) => (Date.parse(b.created_at) - Date.parse(a.created_at)) || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0));
    }
    replace(tbody, rows.map(row));
    if (st.loaded && rows.length === 0) {
      let msg;
      if (st.error?.status === 401) msg = 'Waiting for a token…';
      else if (st.error) msg = 'Could not load the workflows.';
      else if (needle) msg = `No workflow has an id starting with “${st.search}”, and none on this page has one containing it. Press Enter to look the id up exactly.`;
      else if (status || definition || filters.any) msg = 'No workflows match these filters.';
      else msg = 'No workflows yet. Start one with “flowd start DEFINITION” or POST /v1/workflows.';
      tbody.append(h('tr', { class: 'empty-row' }, h('td', { colspan: 6 }, msg)));
    }
    const info = [];
    if (st.loaded) {
      if (!needle) info.push(`${st.rows.length} on page ${st.page + 1}`);
      else if (found.for === st.search && found.more) info.push(`${rows.length} found; only the first ${limit} ids starting with “${st.search}” are shown`);
      else info.push(`${rows.length} found`);
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
  const stop = every(load);
  return () => { stop(); clearTimeout(found.timer); };
}
